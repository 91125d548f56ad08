//! Options structs and their builder-style setters (macros of the lowest layer, so that every
//! layer's options use them through this module, and other crates through `callmask::`).

/// Builder-style setters for an options struct's public fields: `T::default().field(value)`.
/// Option structs are `#[non_exhaustive]` (a new limit or option does not break callers), so
/// other crates build them with these or by assigning fields of a `default()` value.
#[doc(hidden)]
#[macro_export]
macro_rules! option_setters {
    ($t:ty { $($f:ident : $ty:ty),* $(,)? }) => {
        impl $t {
            $(
                #[doc = concat!("Sets `", stringify!($f), "` (see the field's documentation).")]
                #[must_use]
                pub fn $f(mut self, value: $ty) -> Self {
                    self.$f = value;
                    self
                }
            )*
        }
    };
}

pub(crate) use option_setters;

/// An options struct declared once: each field with its doc, attributes, type and default
/// (`pub name: Type = default,`, or `pub name: Type = default; own_setter,` for a field whose
/// setter is written by hand); makes the struct, its `Default` and its builder-style setters.
/// So a new option is one field of the struct; serde (on the struct) gives every binding its
/// JSON name.
macro_rules! options_struct {
    (
        $(#[$m:meta])*
        pub struct $name:ident {
            $( $(#[$fm:meta])* pub $f:ident : $ty:ty = $default:expr $(; $own:ident)? ),* $(,)?
        }
    ) => {
        $(#[$m])*
        pub struct $name {
            $( $(#[$fm])* pub $f: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $f: $default, )* }
            }
        }

        $( $crate::setters::options_struct!(@setter $name, $f, $ty $(, $own)?); )*
    };
    (@setter $name:ident, $f:ident, $ty:ty) => {
        $crate::setters::option_setters!($name { $f: $ty });
    };
    (@setter $name:ident, $f:ident, $ty:ty, own_setter) => {};
}

pub(crate) use options_struct;
