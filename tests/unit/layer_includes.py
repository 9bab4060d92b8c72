#!/usr/bin/env python3
"""Layers include only the layers beneath them.

Each folder of src/meshtrain/ is a layer, a static library that links only the
layers src/meshtrain/CMakeLists.txt's meshtrain_layer(NAME DEPS...) call
names. Linking catches a wrong-way call into a .cpp, but not a header's
inline code or types: this test reads every file under src/meshtrain/<layer>/
and fails on each `#include "meshtrain/<other>/..."` where <other> is not the
layer itself nor one it reaches through its meshtrain_layer() dependencies
(taken transitively). The CMake file is the one list of what may use what.

A planted wrong-way include in a scratch copy must be reported too, so the
check cannot pass by reading nothing.

usage: layer_includes.py SOURCE_DIR   (the repository root)
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*["<]meshtrain/([^/">]+)(/[^">]*)?[">]')
UP_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]*\.\./[^"]*)"')
LAYER_CALL = re.compile(r'^\s*meshtrain_layer\s*\(([^)]*)\)', re.M)
LINK_CALL = re.compile(r'^\s*target_link_libraries\s*\(\s*meshtrain_(\w+)([^)]*)\)', re.M)


def strip_comments(cmake):
    return '\n'.join(line.split('#', 1)[0] for line in cmake.splitlines())


def allowed_layers(cmake_file):
    """{layer: set of layers it may include}, the transitive closure of the
    meshtrain_layer() calls (and of later target_link_libraries(meshtrain_X
    ... meshtrain_Y) between layers)."""
    with open(cmake_file, encoding='utf-8') as f:
        text = strip_comments(f.read())
    direct = {}
    for call in LAYER_CALL.finditer(text):
        words = call.group(1).split()
        if not words or words[0] == 'name':  # the function's own definition
            continue
        direct[words[0]] = {m.group(1) for w in words[1:] for m in [re.fullmatch(r'meshtrain_(\w+)', w)] if m}
    for call in LINK_CALL.finditer(text):
        if call.group(1) in direct:
            direct[call.group(1)] |= set(re.findall(r'\bmeshtrain_(\w+)', call.group(2)))
    closure = {}
    for layer in direct:
        seen, todo = set(), list(direct[layer])
        while todo:
            dep = todo.pop()
            if dep in direct and dep not in seen:  # meshtrain_cuda lives in kernels/: not a layer
                seen.add(dep)
                todo.extend(direct[dep])
        closure[layer] = seen
    return closure


def check(meshtrain_dir, report_root):
    """The problems found, each one line naming the file and line."""
    problems = []
    allowed = allowed_layers(os.path.join(meshtrain_dir, 'CMakeLists.txt'))
    if not allowed:
        return ['%s: no meshtrain_layer(...) call found' % os.path.join(meshtrain_dir, 'CMakeLists.txt')]
    folders = sorted(d for d in os.listdir(meshtrain_dir) if os.path.isdir(os.path.join(meshtrain_dir, d)))
    for folder in folders:
        if folder not in allowed:
            problems.append('src/meshtrain/%s/: a folder that is no meshtrain_layer() in CMakeLists.txt' % folder)
    files = 0
    for layer in folders:
        if layer not in allowed:
            continue
        for root, dirs, names in os.walk(os.path.join(meshtrain_dir, layer)):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(root, name)
                shown = os.path.relpath(path, report_root)
                try:
                    with open(path, encoding='utf-8') as f:
                        lines = f.readlines()
                except UnicodeDecodeError:
                    continue  # not source text
                files += 1
                for number, line in enumerate(lines, 1):
                    up = UP_INCLUDE.match(line)
                    if up:
                        problems.append('%s:%d: layer %s includes "%s": name it "meshtrain/<layer>/...", so this'
                                        ' check sees which layer it is' % (shown, number, layer, up.group(1)))
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    if m.group(2) is None or target not in allowed:
                        problems.append('%s:%d: layer %s includes "meshtrain/%s%s", which is in no layer'
                                        % (shown, number, layer, target, m.group(2) or ''))
                    elif target != layer and target not in allowed[layer]:
                        may = ', '.join(sorted(allowed[layer])) or 'no other layer'
                        problems.append('%s:%d: wrong-way include: layer %s includes layer %s ("meshtrain/%s%s");'
                                        ' %s may include only %s' % (shown, number, layer, target, target,
                                                                     m.group(2), layer, may))
    if files == 0:
        problems.append('%s: no source file read' % meshtrain_dir)
    return problems


def planted_violation_is_caught(meshtrain_dir):
    """A copy of the CMake file and one wrong-way include (the lowest layer
    including the highest) must give exactly one problem naming both."""
    allowed = allowed_layers(os.path.join(meshtrain_dir, 'CMakeLists.txt'))
    low = min(allowed, key=lambda l: len(allowed[l]))
    high = max(allowed, key=lambda l: len(allowed[l]))
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(meshtrain_dir, 'CMakeLists.txt'), encoding='utf-8') as f:
            cmake = f.read()
        with open(os.path.join(tmp, 'CMakeLists.txt'), 'w', encoding='utf-8') as f:
            f.write(cmake)
        for layer in allowed:
            os.makedirs(os.path.join(tmp, layer))
        with open(os.path.join(tmp, low, 'probe.hpp'), 'w', encoding='utf-8') as f:
            f.write('#pragma once\n#include "meshtrain/%s/ok.hpp"\n#include "meshtrain/%s/wrong.hpp"\n' % (low, high))
        problems = check(tmp, tmp)
    expected = '%s/probe.hpp:3: wrong-way include: layer %s includes layer %s' % (low, low, high)
    return len(problems) == 1 and problems[0].startswith(expected), problems


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1])
        return 2
    source_dir = sys.argv[1]
    meshtrain_dir = os.path.join(source_dir, 'src', 'meshtrain')
    failed = False
    caught, got = planted_violation_is_caught(meshtrain_dir)
    if not caught:
        print('FAIL: a planted wrong-way include was not reported as expected; got:')
        print('\n'.join('  ' + p for p in got) or '  nothing')
        failed = True
    allowed = allowed_layers(os.path.join(meshtrain_dir, 'CMakeLists.txt'))
    for layer in sorted(allowed, key=lambda l: (len(allowed[l]), l)):
        print('%-10s may include %s' % (layer, ', '.join(sorted(allowed[layer])) or '(none)'))
    problems = check(meshtrain_dir, source_dir)
    for p in problems:
        print('FAIL: ' + p)
    if problems or failed:
        print('%d wrong-way or unknown include(s)' % len(problems))
        return 1
    print('ok: every #include "meshtrain/<layer>/..." under src/meshtrain/ is of its own layer or one beneath it')
    return 0


if __name__ == '__main__':
    sys.exit(main())
