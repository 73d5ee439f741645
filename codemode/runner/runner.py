# capbridge's Python runner: runs /work/main.py as __main__ with top-level
# await allowed, takes the value of its last expression statement (or,
# failing that, a top-level variable named result) and writes it to the
# result channel (file descriptor 4) as JSON, then exits, so an open
# capwire connection cannot keep the run alive.
#
# Warm (CAPBRIDGE_WARM set): it starts before its program exists, loads
# the client, says so with one byte on descriptor 3, then waits there for
# its environment (the run's token), a JSON array of "KEY=value" that the
# jail's init writes once the program is in /work.
import ast
import asyncio
import json
import os
import sys
import traceback

sys.path[:0] = ["/work", "/capbridge/python"]
_RESULT = "__capbridge_result__"

if os.environ.pop("CAPBRIDGE_WARM", None):
    import capwire  # noqa: F401  (loaded before the program exists)

    os.write(3, b"r")
    with os.fdopen(3, encoding="utf-8") as f:
        os.environ.update(kv.split("=", 1) for kv in json.load(f))
    # /work was empty when the import system first looked.
    import importlib

    importlib.invalidate_caches()


def _compile(path):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    tree = ast.parse(src, "main.py")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        assign = ast.Assign(targets=[ast.Name(_RESULT, ast.Store())], value=last.value)
        tree.body[-1] = ast.copy_location(assign, last)
        ast.fix_missing_locations(tree)
    return compile(tree, "main.py", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def _run(code, scope):
    r = eval(code, scope)
    if asyncio.iscoroutine(r):
        await r


def main():
    scope = {"__name__": "__main__", "__file__": "/work/main.py"}
    status = 0
    try:
        code = _compile("/work/main.py")
        asyncio.run(_run(code, scope))
        value = scope.get(_RESULT, scope.get("result"))
        if value is not None:
            os.write(4, json.dumps(value, default=str, separators=(",", ":")).encode())
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    except BaseException:
        status = 1
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


main()
