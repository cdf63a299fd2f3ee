"""The ctypes mirrors in sdk/python/wex/_lib.py match the C headers.

Struct layouts and constants are compared with what a C compiler makes of
sdk/include/wex (sizeof and offsetof of every field, every status code);
prototypes are compared with the WEX_EXPORT declarations of wex.h, so a
field or a function added in C without its mirror fails here.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT
from wex import _errors, _lib

INCLUDE = os.path.join(ROOT, "sdk", "include")
WEX_H = os.path.join(INCLUDE, "wex", "wex.h")
ABI_H = os.path.join(INCLUDE, "wex", "abi.h")

STRUCTS = [_lib.JobOptions, _lib.Tensor, _lib.SyncReport]
CONSTANTS = {"SIDE_SOURCE": "WEX_SIDE_SOURCE",
             "SIDE_DESTINATION": "WEX_SIDE_DESTINATION",
             "MEMORY_HOST": "WEX_MEMORY_HOST",
             "MEMORY_CUDA": "WEX_MEMORY_CUDA"}


def c_name(cls):
    """The C typedef a ctypes struct mirrors: its docstring's first word."""
    return cls.__doc__.split()[0].rstrip(".")


def status_macros():
    """The WEX_OK / WEX_INPROGRESS / WEX_ERR_* macros abi.h defines."""
    with open(ABI_H) as f:
        return re.findall(r"^#define (WEX_(?:OK|INPROGRESS|ERR_[A-Z]+))\b",
                          f.read(), re.M)


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    """sizeof/offsetof of every mirrored field and the constants' values,
    as the C compiler sees them."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to read the C layout"
    lines = ["#include <stddef.h>", "#include <stdio.h>",
             "#include <wex/wex.h>", "int main(void) {", 'printf("{");']
    for cls in STRUCTS:
        t = c_name(cls)
        lines.append('printf("\\"%s\\": {\\"size\\": %%zu", sizeof(%s));'
                     % (t, t))
        for field, _ in cls._fields_:
            lines.append('printf(", \\"%s\\": [%%zu, %%zu]", offsetof(%s, %s),'
                         " sizeof(((%s *)0)->%s));" % (field, t, field, t,
                                                       field))
        lines.append('printf("}, ");')
    for macro in status_macros() + list(CONSTANTS.values()):
        lines.append('printf("\\"%s\\": %%lld, ", (long long)(%s));'
                     % (macro, macro))
    lines += ['printf("\\"end\\": 0}\\n");', "return 0; }"]
    base = tmp_path_factory.mktemp("mirrors")
    src, exe = base / "layout.c", base / "layout"
    src.write_text("\n".join(lines) + "\n")
    built = subprocess.run([cc, "-std=c11", "-I", INCLUDE, str(src), "-o",
                            str(exe)], capture_output=True, text=True)
    assert built.returncode == 0, ("a mirrored field is not in the C "
                                   "headers:\n" + built.stderr)
    out = subprocess.run([str(exe)], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("cls", STRUCTS, ids=c_name)
def test_every_struct_has_c_size_and_offsets(cls, c_layout):
    want = c_layout[c_name(cls)]
    assert ctypes.sizeof(cls) == want["size"], (
        "%s: ctypes %d bytes, C %d: a field is missing on one side"
        % (c_name(cls), ctypes.sizeof(cls), want["size"]))
    for field, ctype in cls._fields_:
        offset, size = want[field]
        assert (getattr(cls, field).offset, ctypes.sizeof(ctype)) == (
            offset, size), "%s.%s" % (c_name(cls), field)


def test_status_codes_and_constants_match_c(c_layout):
    macros = status_macros()
    assert len(macros) >= 10
    assert {c_layout[m] for m in macros} == set(_lib.STATUS_NAMES), (
        "every C status has a Python name, and no other")
    for m in macros:
        assert _lib.STATUS_MACROS[c_layout[m]] == m
    for py, c in CONSTANTS.items():
        assert getattr(_lib, py) == c_layout[c], py


def test_wex_error_names_the_c_status():
    e = _errors.WexError(-3, "out of memory here")
    assert (e.status, e.name, e.code) == ("OUT_OF_MEMORY", "WEX_ERR_NOMEM",
                                          -3)
    assert _errors.WexError(-6, "x").name == "WEX_ERR_PEER"
    assert _errors.WexError(42, "x").name == "UNKNOWN"


def exported_prototypes():
    """name -> (return type, [parameter types]) of wex.h's WEX_EXPORTs."""
    with open(WEX_H) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    found = {}
    for decl in re.findall(r"WEX_EXPORT\s+([^;]*);", text):
        m = re.match(r"(.*?)\b(wex_\w+)\s*\((.*)\)\s*$", " ".join(decl.split()))
        assert m, "cannot read the declaration: " + decl
        params = [] if m.group(3).strip() == "void" else [
            p.strip() for p in m.group(3).split(",")]
        found[m.group(2)] = (m.group(1).strip(), params)
    return found


def ctype_of(c_type, is_return=False):
    """The ctypes type a C parameter or return type must be mirrored as
    (parameter names dropped)."""
    t = re.sub(r"\bconst\b", " ", c_type)
    t = " ".join(re.sub(r"\*", " * ", t).split())
    words = t.split()
    stars = words.count("*")
    base = [w for w in words if w != "*"]
    if len(base) > 1 and not is_return:
        base = base[:-1]  # the parameter's name
    base = " ".join(base)
    structs = {c_name(cls): cls for cls in STRUCTS}
    scalars = {"wex_status": ctypes.c_int32, "int": ctypes.c_int,
               "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
               "int64_t": ctypes.c_int64}
    if stars == 0:
        return None if base == "void" else scalars[base]
    if stars == 1 and base == "char":
        return ctypes.c_char_p
    if stars == 1 and base in structs:
        return ctypes.POINTER(structs[base])
    if stars == 1:
        return ctypes.c_void_p  # an opaque handle or raw memory
    return ctypes.POINTER(ctypes.c_void_p)  # an out-parameter


def test_every_exported_function_is_mirrored_with_its_prototype():
    c = exported_prototypes()
    py = dict(_lib.prototypes(), **_lib.optional_prototypes())
    assert len(c) >= 20
    assert set(c) == set(py), ("in wex.h only: %s; in _lib.py only: %s"
                               % (sorted(set(c) - set(py)),
                                  sorted(set(py) - set(c))))
    for name, (ret, params) in c.items():
        restype, argtypes = py[name]
        assert restype is ctype_of(ret, is_return=True), name
        assert len(argtypes) == len(params), name
        for i, (p, a) in enumerate(zip(params, argtypes)):
            assert a is ctype_of(p), "%s argument %d (%s)" % (name, i, p)
