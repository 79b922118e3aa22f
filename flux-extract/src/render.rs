//! How a value is written in an answer: as the trace has it (`repr()`, the default), or as
//! `str()` would give it (`render = "str"`), decided from the repr alone.
//!
//! `str()` equals `repr()` for `None`, booleans, numbers and containers (whose `str()` shows
//! their items' reprs); for a `str` it is the text the literal holds. For any other object
//! (`<Foo object at …>`, a class with its own `__str__`) the repr does not say what `str()`
//! gives, so that is an error naming the value, never a guess.
use crate::ExtractError;
use crate::Params;

/// `render`'s parameter: what the answer writes for a value.
pub(crate) const CHOICES: &[&str] = &["repr", "str"];

/// A value as `p`'s `render` asks (`repr` when not given).
pub(crate) fn value(p: &Params, repr: &str) -> Result<String, ExtractError> {
    match p.choice_or("render", CHOICES, "repr")? {
        "str" => str_of_repr(repr).ok_or_else(|| {
            ExtractError::NotObserved(format!(
                "`render = \"str\"`: what str() gives for the value {repr} is not known from its \
                 repr (only None, booleans, numbers, containers and strings are)"
            ))
        }),
        _ => Ok(repr.to_string()),
    }
}

/// What `str()` gives for the value whose `repr()` is `repr`, when the repr says.
pub(crate) fn str_of_repr(repr: &str) -> Option<String> {
    let r = repr.trim();
    if let Some(s) = str_literal(r) {
        return Some(s);
    }
    let same = matches!(r, "None" | "True" | "False" | "inf" | "-inf" | "nan")
        || r.parse::<f64>().is_ok()
        || is_complex(r)
        || matches!(r.as_bytes().first(), Some(b'[' | b'(' | b'{'));
    same.then(|| r.to_string())
}

/// `1j`, `(1+2j)`'s inside: a complex number's repr.
fn is_complex(r: &str) -> bool {
    r.strip_suffix('j')
        .is_some_and(|n| n.parse::<f64>().is_ok())
}

/// The text a Python `str` literal as `repr()` writes it holds: quoted with `'` or `"`, with
/// `\\`, `\'`, `\"`, `\n`, `\r`, `\t`, `\xhh`, `\uhhhh` and `\Uhhhhhhhh` escapes.
fn str_literal(r: &str) -> Option<String> {
    let q = r.chars().next()?;
    if !(q == '\'' || q == '"') || r.len() < 2 || !r.ends_with(q) {
        return None;
    }
    let body = &r[1..r.len() - 1];
    let mut out = String::with_capacity(body.len());
    let mut it = body.chars();
    while let Some(c) = it.next() {
        if c == q {
            return None; // an unescaped quote: not one literal
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = it.next()?;
        let hex = |it: &mut std::str::Chars<'_>, n: usize| -> Option<char> {
            let h: String = it.by_ref().take(n).collect();
            (h.len() == n)
                .then(|| u32::from_str_radix(&h, 16).ok())
                .flatten()
                .and_then(char::from_u32)
        };
        out.push(match e {
            '\\' | '\'' | '"' => e,
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'x' => hex(&mut it, 2)?,
            'u' => hex(&mut it, 4)?,
            'U' => hex(&mut it, 8)?,
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::str_of_repr;

    #[test]
    fn str_of_a_string_is_the_text_its_literal_holds() {
        let cases = [
            (
                "'sectors.sector_8_366.router_3_42'",
                "sectors.sector_8_366.router_3_42",
            ),
            (r#""it's""#, "it's"),
            (
                r"'a\'b\\c\n\t\x00é\u2028\U0001f600'",
                "a'b\\c\n\t\0é\u{2028}😀",
            ),
            ("''", ""),
        ];
        for (repr, s) in cases {
            assert_eq!(str_of_repr(repr).as_deref(), Some(s), "{repr}");
        }
    }

    #[test]
    fn str_of_values_whose_str_is_their_repr_and_of_nothing_else() {
        for same in [
            "None", "True", "3", "-2.5", "1e+100", "inf", "1j", "[1, 'a']", "(1,)", "{'k': 2}",
        ] {
            assert_eq!(str_of_repr(same).as_deref(), Some(same));
        }
        for unknown in [
            "<Foo object at 0x7f>",
            "Decimal('1')",
            "b'x'",
            "'a'b'",
            "'unterminated",
            "datetime.date(2020, 1, 1)",
        ] {
            assert_eq!(str_of_repr(unknown), None, "{unknown}");
        }
    }
}
