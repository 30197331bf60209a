"""The command lines of tools/, demo/ and projects/ import the installed
package and nothing else, as OpenMMLab's tools do: no ``sys.path`` edits,
no import of another tool's module, and every one's ``--help`` runs as a
user runs it."""
import glob
import json
import os.path as osp
import re

from tests.utils import ROOT, explain, run_tool

FOLDERS = ('tools', 'demo', 'projects')
SCRIPTS = sorted(
    osp.relpath(path, ROOT) for folder in FOLDERS
    for path in glob.glob(osp.join(ROOT, folder, '**', '*.py'), recursive=True)
    if "if __name__ == '__main__':" in open(path).read())
# The modules a command line may import beside it: its own (a project's)
PRIVATE = {'projects/digits_canvas': {'digits_data', 'digits_report'}}


def test_no_sys_path_edits_nor_imports_of_other_tools():
    """A script imports a module beside it only if it is its own."""
    found = []
    for folder in FOLDERS:
        for path in glob.glob(osp.join(ROOT, folder, '**', '*.py'),
                              recursive=True):
            rel = osp.relpath(path, ROOT)
            text = open(path).read()
            found += [f'{rel}: sys.path'] * ('sys.path' in text)
            siblings = {osp.splitext(osp.basename(n))[0] for n in
                        glob.glob(osp.join(osp.dirname(path), '*.py'))}
            for name in re.findall(r'^\s*(?:from|import) (\w+)', text, re.M):
                if name in siblings and name not in PRIVATE.get(
                        osp.dirname(rel), ()):
                    found.append(f'{rel}: {name}')
    assert not found, found


# Runs each script as `python SCRIPT --help` would (its folder first on the
# path, run as __main__), in one process: their imports are shared.
HELP = '''
import contextlib, io, json, os.path as osp, runpy, sys
root, done = sys.argv[1], {}
for script in sys.argv[2:]:
    path = osp.join(root, script)
    sys.argv, sys.path[0], out = [path, '--help'], osp.dirname(path), \\
        io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name='__main__')
        done[script] = 'no exit'
    except SystemExit as e:
        done[script] = (e.code, out.getvalue()[:200])
print(json.dumps(done))
'''


def test_every_command_line_has_help():
    assert 'tools/train.py' in SCRIPTS and len(SCRIPTS) >= 20, SCRIPTS
    proc = run_tool('-c', HELP, ROOT, *SCRIPTS, timeout=600)
    assert proc.returncode == 0, explain(proc)
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(done) == SCRIPTS
    for script, (code, out) in done.items():
        assert code in (0, None) and out.startswith('usage: '), \
            f'{script}: exit {code}, {out!r}'
