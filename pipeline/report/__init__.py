"""The report layer: gathers what the analyses return into report documents and draws them as HTML.

Nothing below this package draws; nothing in it computes a finding. `weekly_data` / `incident_data` build
JSON-able documents, `*_charts` turn them into plotly figures, `html` renders the self-contained page.
"""
