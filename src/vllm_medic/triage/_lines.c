/* Line arithmetic for triage's block scan (vllm_medic.triage.lines is the Python face and fallback).

   The screen (Hyperscan) finds candidate lines at SIMD speed; what was left in Python was counting the
   newlines of every block to number those lines (bytes.count runs a byte loop with an early-exit test,
   ~1.5 GB/s), i.e. a third of the screen's own time. Here newlines are counted 16 bytes at a time with
   SSE2 (every x86-64 CPU has it), or by a plain loop the compiler vectorises elsewhere.

   count(buffer, start, end) -> int
       newlines in buffer[start:end] (bounds clipped like bytes.count).
   candidates(buffer, end, positions) -> (indices, starts, count)
       positions: ascending offsets (a line may appear several times). indices: the distinct 0-based
       line numbers of the positions below `end`; starts: where each of those lines starts; count: the
       newlines in buffer[:end]. Exactly what the Python fallback computes. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static Py_ssize_t count_newlines(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t total = 0;
#if defined(__SSE2__)
    const __m128i nl = _mm_set1_epi8('\n');
    while (n >= 16) {
        /* Byte counters overflow after 255 rounds: fold them into 64-bit sums before that. */
        Py_ssize_t rounds = n / 16;
        if (rounds > 255)
            rounds = 255;
        __m128i acc = _mm_setzero_si128();
        for (Py_ssize_t r = 0; r < rounds; r++) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl));
            p += 16;
        }
        __m128i sums = _mm_sad_epu8(acc, _mm_setzero_si128());
        total += (Py_ssize_t)_mm_cvtsi128_si32(sums) + (Py_ssize_t)_mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
        n -= rounds * 16;
    }
#endif
    for (Py_ssize_t i = 0; i < n; i++)
        total += p[i] == '\n';
    return total;
}

static void clip(Py_ssize_t len, Py_ssize_t *start, Py_ssize_t *end)
{
    if (*start < 0)
        *start = *start + len < 0 ? 0 : *start + len;
    if (*end < 0)
        *end = *end + len < 0 ? 0 : *end + len;
    if (*end > len)
        *end = len;
    if (*start > *end)
        *start = *end;
}

static PyObject *lines_count(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start = 0, end = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTuple(args, "y*|nn:count", &view, &start, &end))
        return NULL;
    clip(view.len, &start, &end);
    Py_ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    n = count_newlines((const unsigned char *)view.buf + start, end - start);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(n);
}

static PyObject *lines_candidates(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t end;
    PyObject *positions;
    if (!PyArg_ParseTuple(args, "y*nO:candidates", &view, &end, &positions))
        return NULL;
    Py_ssize_t zero = 0;
    clip(view.len, &zero, &end);
    PyObject *seq = PySequence_Fast(positions, "positions must be a sequence of offsets");
    PyObject *indices = PyList_New(0);
    PyObject *starts = PyList_New(0);
    if (seq == NULL || indices == NULL || starts == NULL)
        goto fail;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t count = 0, last = 0, last_index = -1;
    Py_ssize_t npos = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < npos; k++) {
        Py_ssize_t pos = PyLong_AsSsize_t(items[k]);
        if (pos == -1 && PyErr_Occurred())
            goto fail;
        if (pos >= end)
            break;
        if (pos < last) {
            PyErr_SetString(PyExc_ValueError, "positions must be ascending and not negative");
            goto fail;
        }
        count += count_newlines(buf + last, pos - last);
        last = pos;
        if (count == last_index)
            continue;
        last_index = count;
        Py_ssize_t s = pos;
        while (s > 0 && buf[s - 1] != '\n')
            s--;
        PyObject *i_obj = PyLong_FromSsize_t(count);
        PyObject *s_obj = PyLong_FromSsize_t(s);
        int bad = i_obj == NULL || s_obj == NULL || PyList_Append(indices, i_obj) < 0 ||
                  PyList_Append(starts, s_obj) < 0;
        Py_XDECREF(i_obj);
        Py_XDECREF(s_obj);
        if (bad)
            goto fail;
    }
    count += count_newlines(buf + last, end - last);
    Py_DECREF(seq);
    PyBuffer_Release(&view);
    PyObject *out = Py_BuildValue("(NNn)", indices, starts, count);
    return out;
fail:
    Py_XDECREF(seq);
    Py_XDECREF(indices);
    Py_XDECREF(starts);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"count", lines_count, METH_VARARGS, "count(buffer, start=0, end=len) -> newlines in buffer[start:end]"},
    {"candidates", lines_candidates, METH_VARARGS,
     "candidates(buffer, end, positions) -> (line indices, line starts, newlines in buffer[:end])"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lines", NULL, -1, methods};

PyMODINIT_FUNC PyInit__lines(void) { return PyModule_Create(&module); }
