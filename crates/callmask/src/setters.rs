//! Builder-style setters for the options structs (a macro of the lowest layer, so that every
//! layer's options use it through this module, and other crates through `callmask::`).

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
