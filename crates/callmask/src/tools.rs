//! Tools (functions a model may call), chat messages and tool calls, in the OpenAI shapes.
//!
//! `--tools` files and request bodies hold either a list of tools or an object with a `tools`
//! list; each tool is `{"type": "function", "function": {name, description?, parameters?}}` or the
//! bare `{name, description?, parameters?}`. Missing `parameters` means "no arguments".

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The function's name, as the model writes it.
    pub name: String,
    /// What it does (for the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments object; `None` means no arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// OpenAI's `function.strict`: `Some(false)` lets the arguments carry keys the parameters
    /// do not declare where they do not say `additionalProperties` (JSON Schema's default);
    /// otherwise the dialects allow only the declared keys (see
    /// [`crate::DialectOptions::strict_arguments`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// The functions of one request, in order, with unique names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tools {
    tools: Vec<Tool>,
}

fn bad(message: impl Into<String>) -> Error {
    Error::InvalidTools(message.into())
}

impl Tools {
    /// Builds a tool set, checking that names are non-empty and unique.
    pub fn new(tools: Vec<Tool>) -> Result<Tools> {
        let mut names = std::collections::HashSet::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if t.name.is_empty() {
                return Err(bad(format!("tool {i} has an empty name")));
            }
            if !names.insert(t.name.as_str()) {
                return Err(bad(format!("two tools are named {:?}", t.name)));
            }
            if let Some(p) = &t.parameters {
                if !p.is_object() && !p.is_boolean() {
                    return Err(bad(format!(
                        "the parameters of {:?} must be a JSON Schema object",
                        t.name
                    )));
                }
            }
        }
        Ok(Tools { tools })
    }

    /// Reads OpenAI-style tools: a list, or an object with a `tools` list; each entry either
    /// `{"type": "function", "function": {...}}` or the bare function object. Copies what it
    /// keeps; [`Tools::from_openai_value`] moves it instead.
    pub fn from_openai_json(v: &Value) -> Result<Tools> {
        Self::from_openai_value(v.clone())
    }

    /// [`Tools::from_openai_json`] taking the JSON by value: the tools' parameters are moved
    /// out of it, not copied (a tool set of hundreds of functions is megabytes of schemas).
    pub fn from_openai_value(v: Value) -> Result<Tools> {
        let expected = "expected a list of tools or an object with a `tools` list";
        let list = match v {
            Value::Array(a) => a,
            Value::Object(mut o) => match o.remove("tools") {
                Some(Value::Array(a)) => a,
                _ => return Err(bad(expected)),
            },
            _ => return Err(bad(expected)),
        };
        let mut tools = Vec::with_capacity(list.len());
        for (i, mut entry) in list.into_iter().enumerate() {
            let mut f = match entry.get_mut("function").map(Value::take) {
                Some(f) => {
                    if let Some(t) = entry.get("type") {
                        if t != "function" {
                            return Err(bad(format!("tool {i} has type {t}, not \"function\"")));
                        }
                    }
                    f
                }
                None => entry,
            };
            let name = match f.get_mut("name").map(Value::take) {
                Some(Value::String(s)) => s,
                _ => return Err(bad(format!("tool {i} has no string `name`"))),
            };
            let description = match f.get_mut("description").map(Value::take) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s),
                Some(_) => return Err(bad(format!("the description of tool {i} is not a string"))),
            };
            let parameters = match f.get_mut("parameters").map(Value::take) {
                None | Some(Value::Null) => None,
                Some(p) => Some(p),
            };
            let strict = match f.get("strict") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => return Err(bad(format!("`strict` of tool {i} is not a boolean"))),
            };
            tools.push(Tool {
                name,
                description,
                parameters,
                strict,
            });
        }
        Tools::new(tools)
    }

    /// Reads tools from JSON text (see [`Tools::from_openai_json`]).
    pub fn from_json_str(text: &str) -> Result<Tools> {
        Self::from_openai_value(crate::json_text::parse_json(text)?)
    }

    /// The tools, in order.
    pub fn as_slice(&self) -> &[Tool] {
        &self.tools
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The function part of a tool call: its name and its arguments as JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// The arguments object, as a JSON string (OpenAI's shape).
    pub arguments: String,
}

/// One tool call in the OpenAI `tool_calls` shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// An id for the call (`call_0`, `call_1`, ... unless the output names one).
    pub id: String,
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name and arguments.
    pub function: FunctionCall,
}

impl ToolCall {
    /// A function call with the given id, name and JSON arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }

    /// The arguments parsed as JSON.
    pub fn arguments_json(&self) -> Result<Value> {
        Ok(serde_json::from_str(&self.function.arguments)?)
    }
}

/// One chat message: `system`, `user`, `assistant` (text and/or tool calls) or `tool` (a result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text (a tool result's value for `tool` messages).
    #[serde(default)]
    pub content: Option<String>,
    /// The calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool` messages: the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `tool` messages: the function's name, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    /// A message with a role and text.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// Reads a list of messages (or an object with a `messages` list) from JSON.
    pub fn list_from_json(v: &Value) -> Result<Vec<Message>> {
        let list = match v {
            Value::Object(o) => o.get("messages").cloned().unwrap_or(Value::Null),
            other => other.clone(),
        };
        if !list.is_array() {
            return Err(bad(
                "expected a list of messages or an object with a `messages` list",
            ));
        }
        let msgs: Vec<Message> = serde_json::from_value(list)?;
        for (i, m) in msgs.iter().enumerate() {
            if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
                return Err(bad(format!("message {i} has unknown role {:?}", m.role)));
            }
        }
        Ok(msgs)
    }
}
