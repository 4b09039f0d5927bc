/* An embedding C program (tests/tests/pymem.rs): initialises CPython, runs code compiled
 * under the file name "embedded.py" whose function keep() builds 10000 strings and keeps them
 * in a global, then finalises the interpreter. Built with `python3-config --embed`. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

static const char CODE[] =
    "def keep():\n"
    "    global KEPT\n"
    "    KEPT = []\n"
    "    for i in range(10000):\n"
    "        KEPT.append('embedded-%06d' % i)  # the kept strings\n"
    "\n"
    "keep()\n"
    "print('embedded kept', len(KEPT), flush=True)\n";

int main(void) {
    Py_Initialize();
    PyObject *code = Py_CompileString(CODE, "embedded.py", Py_file_input);
    if (code == NULL) {
        PyErr_Print();
        return 1;
    }
    PyObject *main_module = PyImport_AddModule("__main__"); /* borrowed */
    PyObject *globals = PyModule_GetDict(main_module);      /* borrowed */
    PyObject *result = PyEval_EvalCode(code, globals, globals);
    Py_DECREF(code);
    if (result == NULL) {
        PyErr_Print();
        return 1;
    }
    Py_DECREF(result);
    if (Py_FinalizeEx() < 0) {
        return 120;
    }
    printf("embedded finalized\n");
    return 0;
}
