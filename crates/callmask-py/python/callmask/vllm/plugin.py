"""The file vLLM's ``--tool-parser-plugin`` loads: registers callmask's tool parsers
(``callmask``, ``callmask_<dialect>``). ``python -m callmask.vllm --plugin-path`` prints its
path."""

from callmask.vllm.tool_parser import register

register()
