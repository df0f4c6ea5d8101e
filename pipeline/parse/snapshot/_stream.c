/* A streaming reader of plain-data pickles (protocol 2-5): dicts, lists, tuples, text, bytes, numbers, None.

Why it exists: pickle.load builds a snapshot's whole object graph before anything can be read from it, about
640 bytes per trace event, so a 2M-event trace takes 1.3 GB and a 5 GB pickle more than 24 GB. This reader
builds the same objects, except that the entries of a trace list (a list whose first item is a dict with a
text 'action', what torch.cuda.memory._snapshot() writes per device) are handed to `on_batch(ordinal, items,
columns)` batch by batch as the pickle appends them (pickle batches 1,000 items), the integer fields the
caller names already as int64 columns, and are forgotten: the list stays empty, the memo slots of the entry dicts are cleared, and those of their 'frames' lists hold the stack that
on_batch returns for each item instead (equal content, one object per distinct stack); what later entries
can reference (frame dicts, strings) stays.

It reads only what a snapshot needs and raises `Unsupported` for everything else: any other opcode (globals,
reduce, build, persistent ids, protocol 0-1 text, sets), a memo reference to a slot it cleared, a corrupt or
truncated stream, an object larger than `max_object` bytes, an integer wider than 64 bits + sign. The caller
then reads the file again with the full guarded reader (safe_pickle.py), which gives every such case its own
message. Nothing here runs code named by the pickle, and all memory it takes is bounded by the input: each
pushed object, mark and memo slot costs at least one input byte, and no read is larger than `max_object`.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *Unsupported;

typedef struct {
    PyObject *readinto;
    char *buf;
    Py_ssize_t cap, pos, end;
    int eof;
    long long consumed; /* input bytes read so far: bounds the memo */
    Py_ssize_t max_object;
    PyObject **stack;
    Py_ssize_t sp, stack_cap;
    Py_ssize_t *marks;
    Py_ssize_t nmarks, marks_cap;
    PyObject **memo;
    Py_ssize_t memo_cap, memo_hi, memo_count, scan_from;
    PyObject *on_batch;
    PyObject *streamed; /* the trace lists met, in order; a batch's ordinal is its list's index here */
    PyObject *last_list;
    Py_ssize_t last_ordinal;
    PyObject *action_key, *frames_key;
    PyObject *int_keys; /* a tuple: the entry keys whose values are handed over as int64 columns too */
} Reader;

static int unsupported(const char *why) {
    PyErr_SetString(Unsupported, why);
    return -1;
}

/* Grow `array` (of `*cap` items of `item` bytes) to hold at least `need`, doubling. */
static int grow(void **array, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t size = *cap ? *cap : 1024;
    while (size < need) size *= 2;
    void *bigger = PyMem_Realloc(*array, (size_t)size * item);
    if (bigger == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *array = bigger;
    *cap = size;
    return 0;
}

/* Make at least `n` unread bytes available at buf + pos. */
static int fill(Reader *r, Py_ssize_t n) {
    if (r->end - r->pos >= n) return 0;
    if (n > r->max_object) return unsupported("an object larger than the streaming reader takes");
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, (size_t)(r->end - r->pos));
        r->end -= r->pos;
        r->pos = 0;
    }
    if (n > r->cap) {
        Py_ssize_t size = r->cap;
        while (size < n) size *= 2;
        char *bigger = PyMem_Realloc(r->buf, (size_t)size);
        if (bigger == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->buf = bigger;
        r->cap = size;
    }
    while (r->end < n) {
        if (r->eof) return unsupported("truncated pickle");
        PyObject *view = PyMemoryView_FromMemory(r->buf + r->end, r->cap - r->end, PyBUF_WRITE);
        if (view == NULL) return -1;
        PyObject *got = PyObject_CallOneArg(r->readinto, view);
        /* release() fails if the stream kept an export of our buffer, which is about to move */
        PyObject *released = PyObject_CallMethod(view, "release", NULL);
        Py_DECREF(view);
        if (got == NULL || released == NULL) {
            Py_XDECREF(got);
            Py_XDECREF(released);
            return -1;
        }
        Py_DECREF(released);
        Py_ssize_t count = got == Py_None ? 0 : PyLong_AsSsize_t(got);
        Py_DECREF(got);
        if (count < 0 && PyErr_Occurred()) return -1;
        if (count <= 0 || count > r->cap - r->end) {
            r->eof = 1;
        } else {
            r->end += count;
            r->consumed += count;
        }
    }
    return 0;
}

static const unsigned char *take(Reader *r, Py_ssize_t n) {
    if (fill(r, n) < 0) return NULL;
    const unsigned char *at = (const unsigned char *)r->buf + r->pos;
    r->pos += n;
    return at;
}

static uint64_t little_endian(const unsigned char *at, int n) {
    uint64_t value = 0;
    for (int i = 0; i < n; i++) value |= (uint64_t)at[i] << (8 * i);
    return value;
}

/* Steals `value`. */
static int push(Reader *r, PyObject *value) {
    if (value == NULL) return -1;
    if (grow((void **)&r->stack, &r->stack_cap, r->sp + 1, sizeof(PyObject *)) < 0) {
        Py_DECREF(value);
        return -1;
    }
    r->stack[r->sp++] = value;
    return 0;
}

static void pop_to(Reader *r, Py_ssize_t to) {
    while (r->sp > to) Py_DECREF(r->stack[--r->sp]);
}

static int push_mark(Reader *r) {
    if (grow((void **)&r->marks, &r->marks_cap, r->nmarks + 1, sizeof(Py_ssize_t)) < 0) return -1;
    r->marks[r->nmarks++] = r->sp;
    return 0;
}

static Py_ssize_t pop_mark(Reader *r) {
    if (r->nmarks == 0) return unsupported("corrupt pickle: no mark to pop");
    return r->marks[--r->nmarks];
}

/* The objects above `start` as a new container, their references moved out of the stack. */
static PyObject *collect(Reader *r, Py_ssize_t start, int as_tuple) {
    Py_ssize_t n = r->sp - start;
    PyObject *out = as_tuple ? PyTuple_New(n) : PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (as_tuple)
            PyTuple_SET_ITEM(out, i, r->stack[start + i]);
        else
            PyList_SET_ITEM(out, i, r->stack[start + i]);
    }
    r->sp = start;
    return out;
}

static int memo_put(Reader *r, Py_ssize_t index) {
    if (r->sp < 1) return unsupported("corrupt pickle: memo of an empty stack");
    if (index < 0 || index > r->consumed) return unsupported("corrupt pickle: a memo index beyond the input read");
    if (index >= r->memo_cap) {
        Py_ssize_t old = r->memo_cap;
        if (grow((void **)&r->memo, &r->memo_cap, index + 1, sizeof(PyObject *)) < 0) return -1;
        memset(r->memo + old, 0, (size_t)(r->memo_cap - old) * sizeof(PyObject *));
    }
    PyObject *value = r->stack[r->sp - 1];
    Py_INCREF(value);
    if (r->memo[index] == NULL)
        r->memo_count++;
    else
        Py_DECREF(r->memo[index]);
    r->memo[index] = value;
    if (index >= r->memo_hi) r->memo_hi = index + 1;
    return 0;
}

static int memo_get(Reader *r, Py_ssize_t index) {
    if (index < 0 || index >= r->memo_hi || r->memo[index] == NULL)
        return unsupported("a memo reference to an object the streaming reader does not keep");
    return push(r, Py_NewRef(r->memo[index]));
}

/* The ordinal of `list` as a trace list, registering it when this is its first batch; -1 if it is not one. */
static Py_ssize_t trace_ordinal(Reader *r, PyObject *list, PyObject *first) {
    if (list == r->last_list) return r->last_ordinal;
    Py_ssize_t known = PyList_GET_SIZE(r->streamed);
    for (Py_ssize_t i = 0; i < known; i++) {
        if (PyList_GET_ITEM(r->streamed, i) == list) {
            r->last_list = list;
            r->last_ordinal = i;
            return i;
        }
    }
    if (PyList_GET_SIZE(list) != 0 || !PyDict_CheckExact(first)) return -1;
    PyObject *action = PyDict_GetItemWithError(first, r->action_key);
    if (action == NULL) return PyErr_Occurred() ? -2 : -1;
    if (!PyUnicode_CheckExact(action)) return -1;
    if (PyList_Append(r->streamed, list) < 0) return -2;
    r->last_list = list;
    r->last_ordinal = known;
    return known;
}

/* Clear the memo slots, made since the last batch, of trace entries: nothing honest refers to an entry again.
   An entry's 'frames' list may be (torch shares one between the entries of a block's life), so its slot
   keeps `keep[i]` instead, the stack on_batch matched it to: equal content, already kept by the caller.
   Frame dicts and strings stay as they are. `frames[i]` is item i's frames list; lists come in item order. */
static int forget_entries(Reader *r, PyObject **frames, PyObject *keep, Py_ssize_t n) {
    Py_ssize_t next = 0;
    for (Py_ssize_t i = r->scan_from; i < r->memo_hi; i++) {
        PyObject *value = r->memo[i];
        if (value == NULL) continue;
        if (PyDict_CheckExact(value)) {
            PyObject *action = PyDict_GetItemWithError(value, r->action_key);
            if (action == NULL) {
                if (PyErr_Occurred()) return -1;
                continue;
            }
            r->memo[i] = NULL;
            Py_DECREF(value);
        } else if (PyList_CheckExact(value)) {
            for (Py_ssize_t j = next; j < n; j++) {
                if (frames[j] == value) {
                    r->memo[i] = Py_NewRef(PyList_GET_ITEM(keep, j));
                    Py_DECREF(value);
                    next = j + 1;
                    break;
                }
            }
        }
    }
    r->scan_from = r->memo_hi;
    return 0;
}

/* For each of int_keys, the batch's values as native int64 (bytes), or None where an item lacks the key or
   holds anything but an int that fits: the caller's own column builder then reads that key, and judges. */
static PyObject *int_columns(Reader *r, PyObject *batch) {
    Py_ssize_t n = PyList_GET_SIZE(batch), keys = PyTuple_GET_SIZE(r->int_keys);
    PyObject *columns = PyTuple_New(keys);
    if (columns == NULL) return NULL;
    for (Py_ssize_t k = 0; k < keys; k++) {
        PyObject *key = PyTuple_GET_ITEM(r->int_keys, k);
        PyObject *column = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
        if (column == NULL) {
            Py_DECREF(columns);
            return NULL;
        }
        int64_t *values = (int64_t *)PyBytes_AS_STRING(column);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(batch, i), *value = NULL;
            int overflow = 0;
            long long number = 0;
            if (PyDict_CheckExact(item)) value = PyDict_GetItemWithError(item, key);
            if (value != NULL && PyLong_CheckExact(value)) number = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (value == NULL || !PyLong_CheckExact(value) || overflow || PyErr_Occurred()) {
                PyErr_Clear();
                Py_SETREF(column, Py_NewRef(Py_None));
                break;
            }
            values[i] = number;
        }
        PyTuple_SET_ITEM(columns, k, column);
    }
    return columns;
}

/* Hand one batch of a trace list's entries to on_batch, then forget them (forget_entries). */
static int stream_batch(Reader *r, Py_ssize_t ordinal, Py_ssize_t start) {
    Py_ssize_t n = r->sp - start;
    PyObject **frames = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    if (frames == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = r->stack[start + i];
        frames[i] = PyDict_CheckExact(item) ? PyDict_GetItemWithError(item, r->frames_key) : NULL;
    }
    int status = -1;
    PyObject *batch = PyErr_Occurred() ? NULL : collect(r, start, 0); /* holds the items, so `frames` stays valid */
    PyObject *columns = batch ? int_columns(r, batch) : NULL;
    PyObject *keep = columns ? PyObject_CallFunction(r->on_batch, "nOO", ordinal, batch, columns) : NULL;
    Py_XDECREF(columns);
    if (keep != NULL) {
        if (!PyList_CheckExact(keep) || PyList_GET_SIZE(keep) != n)
            PyErr_SetString(PyExc_TypeError, "on_batch must return a list as long as the batch");
        else
            status = forget_entries(r, frames, keep, n);
    }
    Py_XDECREF(keep);
    Py_XDECREF(batch);
    PyMem_Free(frames);
    return status;
}

/* APPEND / APPENDS: the items above `start` go to the list below them, or to on_batch for a trace list. */
static int append_items(Reader *r, Py_ssize_t start) {
    if (start < 1 || start > r->sp) return unsupported("corrupt pickle: append without a list");
    PyObject *list = r->stack[start - 1];
    if (!PyList_CheckExact(list)) return unsupported("an append to something other than a list");
    if (r->sp == start) return 0;
    Py_ssize_t ordinal = trace_ordinal(r, list, r->stack[start]);
    if (ordinal == -2) return -1;
    if (ordinal >= 0) return stream_batch(r, ordinal, start);
    for (Py_ssize_t i = start; i < r->sp; i++)
        if (PyList_Append(list, r->stack[i]) < 0) return -1;
    pop_to(r, start);
    return 0;
}

static int plain_key(PyObject *key) {
    return PyUnicode_CheckExact(key) || PyLong_CheckExact(key) || PyFloat_CheckExact(key) || PyBool_Check(key) ||
           key == Py_None || PyBytes_CheckExact(key);
}

/* SETITEM / SETITEMS: the key, value pairs above `start` go into the dict below them. */
static int set_items(Reader *r, Py_ssize_t start) {
    if (start < 1 || start > r->sp || (r->sp - start) % 2) return unsupported("corrupt pickle: setitems");
    PyObject *dict = r->stack[start - 1];
    if (!PyDict_CheckExact(dict)) return unsupported("setitems on something other than a dict");
    for (Py_ssize_t i = start; i < r->sp; i += 2) {
        /* a tuple key is hashed through all it holds: a shared one nested deep takes forever */
        if (!plain_key(r->stack[i])) return unsupported("a dict key that is not text or a number");
        if (PyDict_SetItem(dict, r->stack[i], r->stack[i + 1]) < 0) return -1;
    }
    pop_to(r, start);
    return 0;
}

static PyObject *signed_int(const unsigned char *at, Py_ssize_t n) {
    if (n == 0) return PyLong_FromLong(0);
    if (n <= 8) {
        uint64_t value = little_endian(at, (int)n);
        if (n < 8 && (at[n - 1] & 0x80)) value |= ~(uint64_t)0 << (8 * n);
        return PyLong_FromLongLong((long long)value);
    }
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromNativeBytes(at, (size_t)n, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
#else
    return _PyLong_FromByteArray(at, (size_t)n, 1, 1);
#endif
}

/* A counted object: text or bytes whose length takes `width` bytes. */
static int counted(Reader *r, int width, int text) {
    const unsigned char *at = take(r, width);
    if (at == NULL) return -1;
    uint64_t n = little_endian(at, width);
    if (n > (uint64_t)r->max_object) return unsupported("an object larger than the streaming reader takes");
    at = take(r, (Py_ssize_t)n);
    if (at == NULL) return -1;
    if (text) {
        PyObject *decoded = PyUnicode_DecodeUTF8((const char *)at, (Py_ssize_t)n, "surrogatepass");
        if (decoded == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return unsupported("corrupt pickle: text that is not UTF-8");
        }
        return push(r, decoded);
    }
    return push(r, PyBytes_FromStringAndSize((const char *)at, (Py_ssize_t)n));
}

static int wide_int(Reader *r, int width) {
    const unsigned char *at = take(r, width);
    if (at == NULL) return -1;
    uint64_t n = little_endian(at, width);
    if (width == 4 && (at[3] & 0x80)) return unsupported("corrupt pickle: negative length");
    if (n > 4096) return unsupported("an integer wider than the streaming reader takes");
    at = take(r, (Py_ssize_t)n);
    return at == NULL ? -1 : push(r, signed_int(at, (Py_ssize_t)n));
}

static int small_tuple(Reader *r, Py_ssize_t n) {
    if (r->sp - n < (r->nmarks ? r->marks[r->nmarks - 1] : 0)) return unsupported("corrupt pickle: stack underflow");
    return push(r, collect(r, r->sp - n, 1));
}

static int index_op(Reader *r, int width, int put) {
    const unsigned char *at = take(r, width);
    if (at == NULL) return -1;
    Py_ssize_t index = (Py_ssize_t)little_endian(at, width);
    return put ? memo_put(r, index) : memo_get(r, index);
}

static int from_mark(Reader *r, int kind) {
    Py_ssize_t start = pop_mark(r);
    if (start < 0) return -1;
    if (kind == 'e') return append_items(r, start);
    if (kind == 'u') return set_items(r, start);
    if (kind == '1') {
        pop_to(r, start);
        return 0;
    }
    if (kind == 'd') {
        if (push(r, PyDict_New()) < 0) return -1;
        /* move the new dict below its pairs */
        PyObject *dict = r->stack[r->sp - 1];
        memmove(r->stack + start + 1, r->stack + start, (size_t)(r->sp - 1 - start) * sizeof(PyObject *));
        r->stack[start] = dict;
        return set_items(r, start + 1);
    }
    return push(r, collect(r, start, kind == 't'));
}

static int step(Reader *r, unsigned char op, PyObject **result) {
    const unsigned char *at;
    switch (op) {
    case 0x80: /* PROTO */
        if ((at = take(r, 1)) == NULL) return -1;
        return (*at < 2 || *at > 5) ? unsupported("a pickle protocol other than 2-5") : 0;
    case 0x95: /* FRAME: a hint for buffered readers; the stream is read in order anyway */
        return take(r, 8) == NULL ? -1 : 0;
    case '.': /* STOP */
        if (r->sp < 1) return unsupported("corrupt pickle: stop with an empty stack");
        *result = r->stack[--r->sp];
        return 0;
    case '(': return push_mark(r);
    case '}': return push(r, PyDict_New());
    case ']': return push(r, PyList_New(0));
    case ')': return push(r, PyTuple_New(0));
    case 'N': return push(r, Py_NewRef(Py_None));
    case 0x88: return push(r, Py_NewRef(Py_True));
    case 0x89: return push(r, Py_NewRef(Py_False));
    case 'J':
        if ((at = take(r, 4)) == NULL) return -1;
        return push(r, PyLong_FromLong((long)(int32_t)little_endian(at, 4)));
    case 'K':
        if ((at = take(r, 1)) == NULL) return -1;
        return push(r, PyLong_FromLong(*at));
    case 'M':
        if ((at = take(r, 2)) == NULL) return -1;
        return push(r, PyLong_FromLong((long)little_endian(at, 2)));
    case 0x8a: return wide_int(r, 1); /* LONG1 */
    case 0x8b: return wide_int(r, 4); /* LONG4 */
    case 'G':
        if ((at = take(r, 8)) == NULL) return -1;
        return push(r, PyFloat_FromDouble(PyFloat_Unpack8((const char *)at, 0)));
    case 0x8c: return counted(r, 1, 1); /* SHORT_BINUNICODE */
    case 'X': return counted(r, 4, 1);  /* BINUNICODE */
    case 0x8d: return counted(r, 8, 1); /* BINUNICODE8 */
    case 'C': return counted(r, 1, 0);  /* SHORT_BINBYTES */
    case 'B': return counted(r, 4, 0);  /* BINBYTES */
    case 0x8e: return counted(r, 8, 0); /* BINBYTES8 */
    case 0x85: return small_tuple(r, 1);
    case 0x86: return small_tuple(r, 2);
    case 0x87: return small_tuple(r, 3);
    case 't': case 'l': case 'd': case 'e': case 'u': case '1': return from_mark(r, op);
    case 'a':
        if (r->sp < 2) return unsupported("corrupt pickle: append without a list");
        return append_items(r, r->sp - 1);
    case 's':
        if (r->sp < 3) return unsupported("corrupt pickle: setitem without a dict");
        return set_items(r, r->sp - 2);
    case '0': /* POP: a mark if one sits at the top, else an object */
        if (r->nmarks && r->marks[r->nmarks - 1] == r->sp) {
            r->nmarks--;
            return 0;
        }
        if (r->sp < 1) return unsupported("corrupt pickle: pop of an empty stack");
        pop_to(r, r->sp - 1);
        return 0;
    case '2':
        if (r->sp < 1) return unsupported("corrupt pickle: dup of an empty stack");
        return push(r, Py_NewRef(r->stack[r->sp - 1]));
    case 'q': return index_op(r, 1, 1);
    case 'r': return index_op(r, 4, 1);
    case 0x94: return memo_put(r, r->memo_count); /* MEMOIZE */
    case 'h': return index_op(r, 1, 0);
    case 'j': return index_op(r, 4, 0);
    default: {
        char why[64];
        PyOS_snprintf(why, sizeof why, "opcode 0x%02x is not plain data", op);
        return unsupported(why);
    }
    }
}

static PyObject *run(Reader *r) {
    PyObject *result = NULL;
    unsigned long steps = 0;
    while (result == NULL) {
        const unsigned char *at = take(r, 1);
        if (at == NULL || step(r, *at, &result) < 0) return NULL;
        if ((++steps & 0xFFFFF) == 0 && PyErr_CheckSignals() < 0) {
            Py_XDECREF(result);
            return NULL;
        }
    }
    return result;
}

static void release(Reader *r) {
    pop_to(r, 0);
    for (Py_ssize_t i = 0; i < r->memo_hi; i++) Py_XDECREF(r->memo[i]);
    PyMem_Free(r->memo);
    PyMem_Free(r->stack);
    PyMem_Free(r->marks);
    PyMem_Free(r->buf);
    Py_XDECREF(r->readinto);
    Py_XDECREF(r->streamed);
    Py_XDECREF(r->action_key);
    Py_XDECREF(r->frames_key);
    Py_XDECREF(r->int_keys);
}

PyDoc_STRVAR(read_doc,
             "read(stream, on_batch, max_object, int_keys=()) -> (object, trace_lists)\n\n"
             "The object pickled in `stream` (read with readinto), trace entries handed to\n"
             "on_batch(ordinal, items, columns) instead of kept, `columns` holding per int key the items' values\n"
             "as int64 bytes or None; on_batch returns, per item, the list to keep for its frames. trace_lists:\n"
             "the (empty) trace lists in ordinal order. Raises Unsupported for\n"
             "anything but plain data, and for a corrupt stream.");

static PyObject *read_pickle(PyObject *module, PyObject *args) {
    PyObject *stream, *on_batch, *int_keys = NULL;
    Py_ssize_t max_object;
    if (!PyArg_ParseTuple(args, "OOn|O!", &stream, &on_batch, &max_object, &PyTuple_Type, &int_keys)) return NULL;
    Reader r;
    memset(&r, 0, sizeof r);
    r.max_object = max_object < 1024 ? 1024 : max_object;
    r.on_batch = on_batch;
    r.cap = 1 << 20;
    r.buf = PyMem_Malloc((size_t)r.cap);
    r.readinto = PyObject_GetAttrString(stream, "readinto");
    r.streamed = PyList_New(0);
    r.action_key = PyUnicode_InternFromString("action");
    r.frames_key = PyUnicode_InternFromString("frames");
    r.int_keys = int_keys ? Py_NewRef(int_keys) : PyTuple_New(0);
    PyObject *result = NULL;
    if (r.buf == NULL) PyErr_NoMemory();
    if (r.buf && r.readinto && r.streamed && r.action_key && r.frames_key && r.int_keys) {
        PyObject *object = run(&r);
        if (object != NULL) result = Py_BuildValue("NO", object, r.streamed);
    }
    release(&r);
    return result;
}

static PyMethodDef methods[] = {{"read", read_pickle, METH_VARARGS, read_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_stream",
    .m_doc = "Streaming reader of plain-data pickles (see read).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__stream(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    Unsupported = PyErr_NewException("_stream.Unsupported", NULL, NULL);
    if (Unsupported == NULL || PyModule_AddObjectRef(module, "Unsupported", Unsupported) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
