//! The JSON Schema keywords callmask knows, in one table: each keyword's spelling, the kind of
//! value it takes, which part of the compiler enforces it (its [`Role`]), whether the
//! complement (`not`, `if`, overlapping `oneOf`; see `negate.rs`) goes through it, and, for a
//! keyword callmask cannot always enforce, the reason it is refused with.
//!
//! Every list of "the keywords of kind X" is a query on this table: which keywords are
//! annotations ([`is_annotation`]), which make up the scalar lexeme and so the
//! cache key of scalar automata ([`Role::is_scalar`]; see `scalars.rs`), which hold subschemas
//! (for `$id`/`$anchor` discovery in `resolve.rs`: [`Kind::one_schema`], [`Kind::schema_list`],
//! [`Kind::schema_map`]), which the complement handles ([`Keyword::negatable`]), which are
//! refused ([`Keyword::refusal`]), which constrain strings only or never strings (the XML and
//! raw-argument dialects). A list that is a local choice (the keywords `@xml_args` accepts, the
//! keywords whose evaluation depends on the instance for `unevaluated*`) stays where it is
//! used, but is written with [`Keyword`] values, so a misspelling does not compile.
//!
//! Trade-offs:
//! - The scalar path reads a schema once into a typed value (`typed.rs`: one field per
//!   keyword of this table), and its cache key is that value's canonical form. Object, array,
//!   merge and negate code still read the schema as a `serde_json` object
//!   (`obj.get("minItems")`): moving them onto the typed value is a larger change. What keeps
//!   those reads honest is the test `every_keyword_read_is_in_the_table` below, which
//!   scans the schema compiler's and the dialects' sources for keyword reads and fails naming
//!   any keyword missing from this table; and `every_enforced_keyword_is_exercised`, which
//!   requires, for every keyword with an enforcing role, a schema whose language that keyword
//!   changes (or a refusal naming it).
//! - The table is one `match` per column, generated from one row per keyword by a macro: a
//!   lookup by name ([`Keyword::from_name`]) is a string `match`, as fast as the linear scans
//!   over short lists it replaces.
//! - Unknown keywords are not in the table: they are annotations, as JSON Schema says. The
//!   well-known annotations (`title`, `description`, ...) are listed, with the role
//!   [`Role::Annotation`], for documentation only.
//!
//! # Where to add a keyword
//! Add a row to the table below (its spelling, value kind, role, whether `not` goes through it,
//! and a refusal reason if it is not always enforced), then the code that enforces it (the
//! module its role names), and a witness for it in `witness` in this module's tests (a schema
//! whose language the keyword changes): `every_enforced_keyword_is_exercised` does not compile
//! until the witness exists. A scalar keyword (role [`Role::String`] or [`Role::Number`]) is in
//! the scalar cache key by construction.

/// The kind of value a keyword takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One subschema (an object or a boolean).
    Schema,
    /// A list of subschemas.
    SchemaList,
    /// One subschema, or a list of them (`items`: the list is draft 7's tuple form).
    SchemaOrList,
    /// An object from names (or patterns) to subschemas.
    SchemaMap,
    /// Draft 7's `dependencies`: an object from names to a subschema or a list of names.
    Dependencies,
    /// A type name or a list of them.
    Types,
    /// `true` or `false`.
    Bool,
    /// A non-negative integer.
    Count,
    /// A number.
    Number,
    /// A number, or (draft 4) a boolean qualifying `minimum`/`maximum`.
    NumberOrBool,
    /// An ECMA-262 regular expression.
    Regex,
    /// A string.
    String,
    /// A URI reference.
    Uri,
    /// A list of property names.
    Names,
    /// An object from property names to lists of property names.
    NamesMap,
    /// A list of any JSON values.
    Values,
    /// Any JSON value.
    Any,
}

impl Kind {
    /// True when the value is one subschema (for `items`, in its 2020-12 form).
    pub(crate) fn one_schema(self) -> bool {
        matches!(self, Kind::Schema | Kind::SchemaOrList)
    }

    /// True when the value is a list of subschemas (for `items`, in its draft-7 form).
    pub(crate) fn schema_list(self) -> bool {
        matches!(self, Kind::SchemaList | Kind::SchemaOrList)
    }

    /// True when the value maps names to subschemas (some of whose entries may be name lists,
    /// for `dependencies`).
    pub(crate) fn schema_map(self) -> bool {
        matches!(self, Kind::SchemaMap | Kind::Dependencies)
    }
}

/// Which part of callmask enforces a keyword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Selects the JSON types (`type`, `nullable`): read by every path, and folded into the
    /// type bits of the scalar cache key.
    Type,
    /// A finite set of values (`enum`, `const`): `enums.rs`.
    Value,
    /// Changes the automaton of string lexemes (`scalars.rs`, `strings.rs`): part of the
    /// scalar cache key.
    String,
    /// Changes the automaton of number lexemes (`scalars.rs`, `numbers.rs`): part of the
    /// scalar cache key.
    Number,
    /// Enforced by the object node (`objects.rs`, `pattern_properties.rs`, `dependencies.rs`,
    /// `unevaluated.rs`).
    Object,
    /// Enforced by the array node (`objects.rs`, `unevaluated.rs`).
    Array,
    /// An in-place applicator (`allOf` merged in `merge.rs`, `anyOf`/`oneOf` in `unions.rs`,
    /// `not`/`if` in `negate.rs`).
    Applicator,
    /// `then`/`else`: applied only through their `if`; alone, an annotation.
    Branch,
    /// A reference to another schema (`refs.rs`, `resolve.rs`).
    Reference,
    /// Identifies or declares schemas, never constrains a value (`$id`, `$anchor`, `$defs`,
    /// `$schema`, ...): read by `resolve.rs` and `refs.rs`.
    Core,
    /// A well-known annotation: never constrains a value (as every keyword not in the table).
    Annotation,
}

impl Role {
    /// True when a keyword of this role may constrain the values a schema allows (where it
    /// stands by itself): every role but [`Role::Branch`], [`Role::Core`] and
    /// [`Role::Annotation`].
    pub(crate) fn constrains(self) -> bool {
        !matches!(self, Role::Branch | Role::Core | Role::Annotation)
    }

    /// True for the roles that change the scalar lexeme automaton ([`Role::String`],
    /// [`Role::Number`]): exactly the keywords the scalar cache key is made of.
    pub(crate) fn is_scalar(self) -> bool {
        matches!(self, Role::String | Role::Number)
    }
}

/// Generates [`Keyword`] and its columns from one row per keyword:
/// `Variant = "spelling", Kind, Role, negatable, refusal;`.
macro_rules! keyword_table {
    ($($variant:ident = $name:literal, $kind:ident, $role:ident, $neg:literal, $refusal:expr;)*) => {
        /// A JSON Schema keyword callmask knows (see the module doc; one row of the table).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) enum Keyword {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl Keyword {
            /// Every keyword, in table order.
            pub(crate) const ALL: &'static [Keyword] = &[$(Keyword::$variant),*];

            /// The keyword as a schema spells it.
            pub(crate) const fn name(self) -> &'static str {
                match self {
                    $(Keyword::$variant => $name,)*
                }
            }

            /// The keyword spelled `name`, if callmask knows it (`None`: an annotation).
            pub(crate) fn from_name(name: &str) -> Option<Keyword> {
                match name {
                    $($name => Some(Keyword::$variant),)*
                    _ => None,
                }
            }

            /// The kind of value the keyword takes.
            pub(crate) const fn kind(self) -> Kind {
                match self {
                    $(Keyword::$variant => Kind::$kind,)*
                }
            }

            /// The part of callmask that enforces the keyword.
            pub(crate) const fn role(self) -> Role {
                match self {
                    $(Keyword::$variant => Role::$role,)*
                }
            }

            /// True when the complement of a schema (`not`, `if`, overlapping `oneOf`) goes
            /// through this keyword exactly (see `negate.rs`); any other constraining keyword
            /// is refused by name inside `not`.
            pub(crate) const fn negatable(self) -> bool {
                match self {
                    $(Keyword::$variant => $neg,)*
                }
            }

            /// Why the keyword is refused ([`crate::Error::UnsupportedKeyword`]) when it is still
            /// in a schema after the rewrites that enforce its supported forms (or always).
            pub(crate) const fn refusal(self) -> Option<&'static str> {
                match self {
                    $(Keyword::$variant => $refusal,)*
                }
            }
        }
    };
}

keyword_table! {
    // Types.
    Type = "type", Types, Type, true, None;
    Nullable = "nullable", Bool, Type, true, None;
    // Finite sets of values.
    Enum = "enum", Values, Value, true, None;
    Const = "const", Any, Value, true, None;
    // Strings. `format` is not negatable: its automata are not known to be complete (and it is
    // an annotation in 2020-12).
    MinLength = "minLength", Count, String, true, None;
    MaxLength = "maxLength", Count, String, true, None;
    Pattern = "pattern", Regex, String, true, None;
    Format = "format", String, String, false, None;
    // Numbers. `multipleOf`'s automaton accepts every multiple with at most 15 significant
    // digits and no exponent, which covers every canonical spelling: negatable.
    Minimum = "minimum", Number, Number, true, None;
    Maximum = "maximum", Number, Number, true, None;
    ExclusiveMinimum = "exclusiveMinimum", NumberOrBool, Number, true, None;
    ExclusiveMaximum = "exclusiveMaximum", NumberOrBool, Number, true, None;
    MultipleOf = "multipleOf", Number, Number, true, None;
    // Objects.
    Properties = "properties", SchemaMap, Object, true, None;
    Required = "required", Names, Object, true, None;
    AdditionalProperties = "additionalProperties", Schema, Object, true, None;
    PatternProperties = "patternProperties", SchemaMap, Object, false, None;
    PropertyNames = "propertyNames", Schema, Object, false, None;
    MinProperties = "minProperties", Count, Object, false, None;
    MaxProperties = "maxProperties", Count, Object, false, None;
    DependentRequired = "dependentRequired", NamesMap, Object, false, None;
    DependentSchemas = "dependentSchemas", SchemaMap, Object, false,
        Some("more than 4 dependent schemas in one object (each doubles its variants)");
    Dependencies = "dependencies", Dependencies, Object, false,
        Some("more than 4 schema-valued dependencies in one object (each doubles its variants)");
    UnevaluatedProperties = "unevaluatedProperties", Schema, Object, false,
        Some("supported only where the evaluated properties are static (in-place applicators only `allOf` and `$ref`, no `patternProperties`, `anyOf`, `oneOf`, `not`, `if` or dependencies, no `unevaluated*` in a part)");
    // Arrays.
    Items = "items", SchemaOrList, Array, true, None;
    PrefixItems = "prefixItems", SchemaList, Array, true, None;
    AdditionalItems = "additionalItems", Schema, Array, true, None;
    MinItems = "minItems", Count, Array, true, None;
    MaxItems = "maxItems", Count, Array, true, None;
    UniqueItems = "uniqueItems", Bool, Array, false, None;
    Contains = "contains", Schema, Array, false, None;
    MinContains = "minContains", Count, Array, false, None;
    MaxContains = "maxContains", Count, Array, false, None;
    UnevaluatedItems = "unevaluatedItems", Schema, Array, false,
        Some("supported only where the evaluated items are static (in-place applicators only `allOf` and `$ref`, no `contains`, `anyOf`, `oneOf`, `not`, `if`, no `unevaluated*` in a part)");
    // In-place applicators.
    AllOf = "allOf", SchemaList, Applicator, true, None;
    AnyOf = "anyOf", SchemaList, Applicator, true, None;
    OneOf = "oneOf", SchemaList, Applicator, true, None;
    Not = "not", Schema, Applicator, true, None;
    If = "if", Schema, Applicator, true, None;
    Then = "then", Schema, Branch, false, None;
    Else = "else", Schema, Branch, false, None;
    // References.
    Ref = "$ref", Uri, Reference, true, None;
    DynamicRef = "$dynamicRef", Uri, Reference, false,
        Some("`$dynamicRef` resolves only as a string in a 2020-12 document");
    RecursiveRef = "$recursiveRef", Uri, Reference, false,
        Some("recursive references are not supported");
    // Identifiers and declarations.
    Schema = "$schema", Uri, Core, false, None;
    Id = "$id", Uri, Core, false, None;
    Anchor = "$anchor", String, Core, false, None;
    DynamicAnchor = "$dynamicAnchor", String, Core, false, None;
    Defs = "$defs", SchemaMap, Core, false, None;
    Definitions = "definitions", SchemaMap, Core, false, None;
    // Well-known annotations.
    Comment = "$comment", String, Annotation, false, None;
    Title = "title", String, Annotation, false, None;
    Description = "description", String, Annotation, false, None;
    Default = "default", Any, Annotation, false, None;
    Examples = "examples", Values, Annotation, false, None;
    Deprecated = "deprecated", Bool, Annotation, false, None;
    ReadOnly = "readOnly", Bool, Annotation, false, None;
    WriteOnly = "writeOnly", Bool, Annotation, false, None;
    ContentEncoding = "contentEncoding", String, Annotation, false, None;
    ContentMediaType = "contentMediaType", String, Annotation, false, None;
}

impl Keyword {
    /// True for the keywords a schema of strings alone may hold (`type`, `enum`, `const` and
    /// the string keywords): what `propertyNames` and a raw string argument are checked with.
    pub(crate) fn fits_string_schema(self) -> bool {
        matches!(self, Keyword::Type | Keyword::Enum | Keyword::Const)
            || self.role() == Role::String
    }

    /// True for the keywords that never constrain a string (they apply to numbers, arrays or
    /// objects only).
    pub(crate) fn never_constrains_strings(self) -> bool {
        matches!(self.role(), Role::Number | Role::Object | Role::Array)
    }
}

/// True for a keyword that does not constrain values: an annotation (`title`, `$defs`, ...) or a
/// keyword callmask does not know (`x-...`, vendor extensions). Such keywords never change the
/// language, wherever they stand.
pub(crate) fn is_annotation(k: &str) -> bool {
    Keyword::from_name(k).is_none_or(|k| !k.role().constrains())
}

#[cfg(test)]
mod tests;
