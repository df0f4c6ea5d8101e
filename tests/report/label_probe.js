// Added to a copy of a report page by test_report_layout.py: once the charts are drawn, it writes into the page
// every pair of visible chart texts whose bounding rectangles overlap, and how many texts it read.
window.addEventListener("load", function () {
  setTimeout(function () {
    var touch = 1;  // glyph edges touching by a pixel are not labels on labels
    var overlaps = [], count = 0;
    var plots = document.querySelectorAll(".js-plotly-plot");
    for (var p = 0; p < plots.length; p++) {
      var boxes = [], texts = plots[p].querySelectorAll("text");
      for (var i = 0; i < texts.length; i++) {
        var t = texts[i], r = t.getBoundingClientRect(), s = window.getComputedStyle(t);
        if (!t.textContent.trim() || r.width < 1 || r.height < 1) continue;
        if (s.visibility === "hidden" || s.display === "none" || Number(s.opacity) === 0) continue;
        boxes.push({text: t.textContent, kind: t.getAttribute("class") || "tick", l: r.left, t: r.top, r: r.right, b: r.bottom});
      }
      count += boxes.length;
      for (var a = 0; a < boxes.length; a++) {
        for (var b = a + 1; b < boxes.length; b++) {
          var A = boxes[a], B = boxes[b];
          var w = Math.min(A.r, B.r) - Math.max(A.l, B.l), h = Math.min(A.b, B.b) - Math.max(A.t, B.t);
          if (w > touch && h > touch) {
            overlaps.push(plots[p].id + ": " + JSON.stringify(A.text) + " (" + A.kind + ") on " + JSON.stringify(B.text) + " (" + B.kind + ")");
          }
        }
      }
    }
    var pre = document.createElement("pre");
    pre.id = "label-overlaps";
    pre.hidden = true;
    pre.textContent = JSON.stringify({texts: count, overlaps: overlaps});
    document.body.appendChild(pre);
  }, 1500);
});
