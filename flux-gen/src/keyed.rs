//! Seeded choices that do not depend on the order things are processed in: every random draw
//! is a pure function of the set's seed and a stable key naming what is drawn for (a module, a
//! function, a question). That is what lets shards, run on different machines in any order,
//! make exactly the choices one unsharded run makes.
//!
//! The shard selection is here too (`--shard K/N` of `flux gen` and `flux harvest`).
use sha2::{Digest, Sha256};

/// A 64-bit value from `seed` and `key` (SHA-256, first 8 bytes, big endian): stable across
/// machines, Rust versions and runs.
pub fn hash64(seed: u64, key: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_be_bytes());
    h.update([0u8]);
    h.update(key.as_bytes());
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

/// A small deterministic generator (SplitMix64) started from [`hash64`] of a key: for the few
/// draws one decision needs (pick an invocation, a line, a subset of tests).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, key: &str) -> Rng {
        Rng(hash64(seed, key))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    /// One element of `items`, or None when it is empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.below(items.len())])
        }
    }

    /// `items` in a seeded order (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// Sort `items` by a seeded key of each (`key_of` names it stably): a permutation that is the
/// same whatever order `items` came in.
pub fn seeded_order<T>(seed: u64, items: &mut [T], key_of: impl Fn(&T) -> String) {
    items.sort_by_cached_key(|t| {
        let k = key_of(t);
        (hash64(seed, &k), k)
    });
}

/// `--shard K/N`: the K-th (from 1) of N disjoint parts of a work list, chosen by a hash of
/// each item's key, so any shard can tell on its own what is its part, and the N parts
/// together are the whole list exactly once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// The whole list.
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// Parse `K/N` (1 ≤ K ≤ N).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}`: a shard is K/N, e.g. 2/8"))?;
        let k: u32 = k
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: K is not a number"))?;
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: N is not a number"))?;
        if n == 0 || k == 0 || k > n {
            return Err(format!("`{s}`: need 1 <= K <= N"));
        }
        Ok(Shard { index: k, count: n })
    }

    /// Is the item named `key` in this shard? (Seed 0: shards are a property of the work, not
    /// of a set's seed, so a harvest and a generation split the same way.)
    pub fn holds(&self, key: &str) -> bool {
        self.count == 1 || (hash64(0, key) % u64::from(self.count)) as u32 + 1 == self.index
    }

    /// The items of `items` in this shard, in their order.
    pub fn select<T>(&self, items: Vec<T>, key_of: impl Fn(&T) -> String) -> Vec<T> {
        items
            .into_iter()
            .filter(|t| self.holds(&key_of(t)))
            .collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_draws_are_stable() {
        // Pinned: a change here changes every generated set.
        assert_eq!(hash64(1, "sympy/a"), hash64(1, "sympy/a"));
        assert_ne!(hash64(1, "sympy/a"), hash64(2, "sympy/a"));
        let mut a = Rng::new(3, "k");
        let mut b = Rng::new(3, "k");
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
        let mut v: Vec<u32> = (0..20).collect();
        Rng::new(1, "s").shuffle(&mut v);
        let mut w = v.clone();
        w.sort();
        assert_eq!(w, (0..20).collect::<Vec<_>>());
        assert_ne!(v, w);
    }

    #[test]
    fn seeded_order_ignores_input_order() {
        let mut a = vec!["x", "y", "z", "w"];
        let mut b = vec!["w", "z", "y", "x"];
        seeded_order(5, &mut a, |s| s.to_string());
        seeded_order(5, &mut b, |s| s.to_string());
        assert_eq!(a, b);
    }

    #[test]
    fn shards_partition_the_work() {
        let keys: Vec<String> = (0..500).map(|i| format!("repo/mod{i}.py")).collect();
        let n = 7;
        let mut seen = vec![0; keys.len()];
        for k in 1..=n {
            let s = Shard::parse(&format!("{k}/{n}")).unwrap();
            for (i, key) in keys.iter().enumerate() {
                if s.holds(key) {
                    seen[i] += 1;
                }
            }
            // No shard is empty or holds nearly everything.
            let mine = keys.iter().filter(|x| s.holds(x)).count();
            assert!(mine > 30 && mine < 120, "{mine}");
        }
        assert!(seen.iter().all(|&c| c == 1));
        assert!(Shard::ALL.holds("anything"));
        for bad in ["0/3", "4/3", "a/3", "3", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Shard::parse(" 2/8").unwrap().to_string(), "2/8");
    }
}
