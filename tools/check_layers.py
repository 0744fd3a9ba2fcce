"""Fails when the core's layering breaks: a module may use only the modules below it, no two files
may use each other, directly or around a cycle, and only io/ touches files (`make test` runs
this; unit tests are exempt).

Layers, bottom up (README, "Layout"): the base (error, failpoint, runtime), io, commit_log, format, read,
write, lookup, changelog, catalog, stream and lineage, rest, functions, ffi, then the extension's entry. A file's uses are
its `crate::...` and `super::...`/`self::...` paths; a directory's mod.rs counts as a file of its
directory (it may only declare and re-export, or use its files: then they must not use it).
"""
import os
import re
import sys

LAYERS = [
    {"error", "failpoint", "runtime"},
    {"io"},
    {"commit_log"},
    {"format"},
    {"read"},
    {"write"},
    {"lookup"},
    {"changelog"},
    {"catalog"},
    {"stream", "lineage"},
    {"rest"},
    {"functions"},
    {"ffi"},
    {"extension", "lib"},
]
LAYER = {m: i for i, names in enumerate(LAYERS) for m in names}
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def files():
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith(".rs"):
                yield os.path.relpath(os.path.join(root, n), SRC)


def unit(rel):
    """(module, file) of a source path: read/scan.rs -> (read, read/scan); error.rs -> (error, error)."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts[0], "/".join(parts)


def code(text):
    """The text without string literals, comments and unit tests (a test may use what it tests)."""
    text = re.sub(r'r#+"(?:.|\n)*?"#+', '""', text)  # raw strings
    text = re.sub(r'"(?:\\(?:.|\n)|[^"\\])*"', '""', text)  # strings (before comments: "file://"; a \ may end a line)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*(?:.|\n)*?\*/", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


# What the crate root re-exports (lib.rs), by module.
ROOT_ITEMS = {"Catalog": "catalog", "TableInfo": "catalog", "Transaction": "catalog", "Error": "error",
              "ErrorKind": "error", "Result": "error"}


def expand_groups(text):
    """`crate::{a::b, c}` and nested groups as one path per line (`crate::a::b`, `crate::c`)."""
    while True:
        m = re.search(r"\b((?:crate|super|self)(?:::\w+)*)::\{", text)
        if not m:
            return text
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        inner = text[m.end() : j - 1]
        parts, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        parts.append(cur)
        paths = " ".join(f"{m.group(1)}::{p.strip()};" for p in parts if p.strip() and p.strip() != "self")
        text = text[: m.start()] + paths + text[j:]


def uses(rel, text):
    module, me = unit(rel)
    is_mod = rel.endswith("mod.rs") or "/" not in me
    out = set()
    text = expand_groups(text)
    for m in re.finditer(r"\bcrate::([a-z_]+)(?:::([a-z_]+))?", text):
        top, sub = m.group(1), m.group(2)
        target = f"{top}/{sub}" if sub and os.path.exists(os.path.join(SRC, top, sub + ".rs")) else top
        out.add(target)
    text = expand_groups(text)
    for m in re.finditer(r"\bcrate::([A-Z]\w*)", text):
        out.add(ROOT_ITEMS.get(m.group(1), "lib"))
    # super::super::x climbs two levels: from a file in a directory, the crate root
    for m in re.finditer(r"\bsuper::super::([a-z_]+)", text):
        out.add(m.group(1))
    text = re.sub(r"\bsuper::super::\w+", "", text)
    refs = [(k, n) for k, n in re.findall(r"\b(super|self)::([a-zA-Z_]+)", text)]
    for kind, name in refs:
        if kind == "self" and not is_mod:
            continue  # self:: inside a file names its own items
        base = me if (kind == "self") else (me.rsplit("/", 1)[0] if "/" in me else "")
        if base == "" and kind == "super":
            continue
        candidate = f"{base}/{name}" if base else name
        if not name[0].islower():
            out.add(base)  # an item (a type) of the module: its mod.rs
        elif os.path.exists(os.path.join(SRC, candidate + ".rs")) or os.path.isdir(os.path.join(SRC, candidate)):
            out.add(candidate)
        elif kind == "super":
            out.add(base)  # an item of the parent module: its mod.rs
    out.discard(me)
    return out


def main():
    graph, problems = {}, []
    for rel in sorted(files()):
        module, me = unit(rel)
        if module not in LAYER:
            problems.append(f"src/{rel}: module {module} has no layer in tools/check_layers.py")
            continue
        with open(os.path.join(SRC, rel)) as f:
            text = f.read()
        targets = uses(rel, code(text))
        graph[me] = targets
        file_access = r"\bstd::fs\b|\bstd::\{[^}]*\bfs\b|\btokio::fs\b|\bFile::(open|create)\b|\bread_dir\b|\blibc::open"
        if module != "io" and re.search(file_access, code(text)):
            problems.append(f"src/{rel}: reads or writes files itself; all file access goes through io/")
        for t in sorted(targets):
            top = t.split("/")[0]
            if top not in LAYER:
                continue
            if top != module and LAYER[top] >= LAYER[module]:
                problems.append(f"src/{rel}: {module} uses {t}, which is not below it")
    # cycles between files (a module's mod.rs included)
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for t in sorted(graph.get(n, ())):
            if t not in graph:
                continue
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                problems.append("cycle: " + " -> ".join(cycle))
            elif t not in state:
                visit(t)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print(f"layering ok: {len(graph)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
