//! Prices in USD per million tokens, by model-name prefix (longest prefix wins). The table is
//! a convenience and goes stale; `--price-in/--price-out` override it.

/// Input and output price per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

/// (model prefix, input $/Mtok, output $/Mtok).
pub const TABLE: &[(&str, f64, f64)] = &[
    ("gpt-4o-mini", 0.15, 0.60),
    ("gpt-4o", 2.50, 10.00),
    ("gpt-4.1-nano", 0.10, 0.40),
    ("gpt-4.1-mini", 0.40, 1.60),
    ("gpt-4.1", 2.00, 8.00),
    ("gpt-5-nano", 0.05, 0.40),
    ("gpt-5-mini", 0.25, 2.00),
    ("gpt-5", 1.25, 10.00),
    ("o3-mini", 1.10, 4.40),
    ("o4-mini", 1.10, 4.40),
    ("o3", 2.00, 8.00),
    ("claude-3-5-haiku", 0.80, 4.00),
    ("claude-haiku-4", 1.00, 5.00),
    ("claude-3-5-sonnet", 3.00, 15.00),
    ("claude-3-7-sonnet", 3.00, 15.00),
    ("claude-sonnet-4", 3.00, 15.00),
    ("claude-opus-4", 15.00, 75.00),
    ("oracle", 0.0, 0.0),
    ("static-baseline", 0.0, 0.0),
];

impl Price {
    /// The table's price for `model`, with overrides; `None` when unknown and not overridden.
    pub fn resolve(model: &str, price_in: Option<f64>, price_out: Option<f64>) -> Option<Price> {
        let m = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let table = TABLE
            .iter()
            .filter(|(p, _, _)| m.starts_with(p))
            .max_by_key(|(p, _, _)| p.len())
            .map(|(_, i, o)| Price {
                input: *i,
                output: *o,
            });
        match (table, price_in, price_out) {
            (_, Some(i), Some(o)) => Some(Price {
                input: i,
                output: o,
            }),
            (Some(t), i, o) => Some(Price {
                input: i.unwrap_or(t.input),
                output: o.unwrap_or(t.output),
            }),
            (None, Some(i), None) => Some(Price {
                input: i,
                output: 0.0,
            }),
            (None, None, Some(o)) => Some(Price {
                input: 0.0,
                output: o,
            }),
            (None, None, None) => None,
        }
    }

    /// Cost in USD.
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        (tokens_in as f64 * self.input + tokens_out as f64 * self.output) / 1e6
    }
}
