"""``python -m callmask.vllm --plugin-path``: the path of the file to give vLLM's
``--tool-parser-plugin``."""

import pathlib
import sys


def main() -> int:
    if sys.argv[1:] == ["--plugin-path"]:
        print(pathlib.Path(__file__).with_name("plugin.py"))
        return 0
    print("usage: python -m callmask.vllm --plugin-path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
