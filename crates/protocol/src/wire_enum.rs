//! [`wire_enum!`](crate::wire_enum): the one way a closed enum is written in this workspace
//! when it travels (or is stored) as a string.

/// Declares a closed enum whose values travel as fixed strings.
///
/// Each variant names its wire string. The enum derives `Debug`, `Clone`, `Copy`, `PartialEq`,
/// `Eq`, `Hash` and serde's `Serialize` / `Deserialize` (the wire string both ways; any other
/// string is refused), and gets:
///
/// - `ALL`: every value, in declaration order, as an array;
/// - `as_str`: the wire string;
/// - `parse`: the value of an exact wire string (`None` for anything else);
/// - `Display`: the wire string.
///
/// Attributes before the name (doc comments, extra derives such as `Default` or `Ord`) are
/// applied to the enum; attributes before a variant (doc comments, `#[default]`) to the variant.
/// The crate using the macro must depend on `serde`.
///
/// ```
/// openphone_protocol::wire_enum!(
///     /// A traffic light.
///     Light { Red = "red", Amber = "amber", Green = "green" }
/// );
/// assert_eq!(Light::parse("amber"), Some(Light::Amber));
/// assert_eq!(Light::ALL.len(), 3);
/// assert_eq!(serde_json::to_string(&Light::Green).unwrap(), "\"green\"");
/// ```
#[macro_export]
macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $( $(#[$vdoc:meta])* $variant:ident = $wire:literal ),* $(,)? }) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize,
        )]
        pub enum $name {
            $( $(#[$vdoc])* #[serde(rename = $wire)] $variant, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$($wire),*].len()] = [ $( $name::$variant, )* ];

            /// The wire string.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )*
                }
            }

            /// Parses the exact wire string.
            pub fn parse(s: &str) -> ::core::option::Option<Self> {
                match s {
                    $( $wire => ::core::option::Option::Some($name::$variant), )*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl $crate::__schema::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(stringify!($name))
            }

            fn json_schema(
                _: &mut $crate::__schema::schemars::SchemaGenerator,
            ) -> $crate::__schema::schemars::Schema {
                $crate::string_enum([$($wire),*])
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
