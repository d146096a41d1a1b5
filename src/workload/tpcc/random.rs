//! TPC-C's random functions (clause 4.3.2): uniform ranges, NURand with its C constants
//! (clause 2.1.6), customer last names from syllables (clause 4.3.2.3), and the random a-strings
//! and n-strings of clause 4.3.2.2.

use rand::Rng;
use rand::rngs::SmallRng;

/// The run-time C constants of NURand (clause 2.1.6). `C_LAST_RUN - C_LAST_LOAD` = 66 satisfies
/// clause 2.1.6.1 (in 65..=119, not 96 or 112).
pub const C_LAST_LOAD: u32 = 157;
/// C for customer last names in transactions.
pub const C_LAST_RUN: u32 = 223;
/// C for customer ids.
pub const C_ID: u32 = 259;
/// C for item ids.
pub const C_OL_I_ID: u32 = 7911;

/// The ten syllables of customer last names (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

/// The random source of one loader unit or one worker.
pub struct TpccRng {
    rng: SmallRng,
}

impl TpccRng {
    /// A generator seeded by `seed`.
    pub fn new(seed: u64) -> TpccRng {
        use rand::SeedableRng;
        TpccRng { rng: SmallRng::seed_from_u64(seed) }
    }

    /// Uniform in `lo..=hi`.
    pub fn uniform(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.random_range(lo..=hi)
    }

    /// Uniform float in `lo..=hi`.
    pub fn uniform_f(&mut self, lo: f64, hi: f64) -> f64 {
        self.rng.random_range(lo..=hi)
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
    pub fn nurand(&mut self, a: i64, c: u32, x: i64, y: i64) -> i64 {
        (((self.uniform(0, a) | self.uniform(x, y)) + i64::from(c)) % (y - x + 1)) + x
    }

    /// A customer id for a transaction: NURand(1023, 1, 3000).
    pub fn customer_id(&mut self) -> i64 {
        self.nurand(1023, C_ID, 1, 3000)
    }

    /// An item id for a transaction: NURand(8191, 1, 100000).
    pub fn item_id(&mut self) -> i64 {
        self.nurand(8191, C_OL_I_ID, 1, 100_000)
    }

    /// A last name for a transaction: the name of NURand(255, 0, 999) with the run constant.
    pub fn last_name_run(&mut self) -> String {
        last_name(self.nurand(255, C_LAST_RUN, 0, 999))
    }

    /// A last name for the loader's customers 1001..=3000.
    pub fn last_name_load(&mut self) -> String {
        last_name(self.nurand(255, C_LAST_LOAD, 0, 999))
    }

    /// A random a-string of `lo..=hi` alphanumeric characters.
    pub fn astring(&mut self, lo: i64, hi: i64) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let len = self.uniform(lo, hi);
        (0..len).map(|_| char::from(CHARS[self.rng.random_range(0..CHARS.len())])).collect()
    }

    /// A random n-string of `len` digits.
    pub fn nstring(&mut self, len: usize) -> String {
        (0..len).map(|_| char::from(b'0' + self.rng.random_range(0..10u8))).collect()
    }

    /// A zip code: 4 random digits then `11111` (clause 4.3.2.7).
    pub fn zip(&mut self) -> String {
        format!("{}11111", self.nstring(4))
    }

    /// i_data / s_data: an a-string of 26..=50 characters, 10% of them containing `ORIGINAL` at
    /// a random position (clause 4.3.3.1).
    pub fn data_with_original(&mut self) -> String {
        let mut s = self.astring(26, 50);
        if self.uniform(1, 10) == 1 {
            let at = self.uniform(0, s.len() as i64 - 8) as usize;
            s.replace_range(at..at + 8, "ORIGINAL");
        }
        s
    }

    /// A random permutation of `1..=n`.
    pub fn permutation(&mut self, n: i64) -> Vec<i64> {
        use rand::seq::SliceRandom;
        let mut v: Vec<i64> = (1..=n).collect();
        v.shuffle(&mut self.rng);
        v
    }
}

/// The last name of number `n` in 0..=999: the syllables of its three digits.
pub fn last_name(n: i64) -> String {
    let n = n.clamp(0, 999) as usize;
    [n / 100, (n / 10) % 10, n % 10].iter().map(|&d| SYLLABLES[d]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut r = TpccRng::new(7);
        let mut hits = vec![0u32; 3001];
        for _ in 0..100_000 {
            let c = r.customer_id();
            assert!((1..=3000).contains(&c));
            hits[c as usize] += 1;
        }
        let max = *hits.iter().max().unwrap_or(&0);
        assert!(max > 100, "NURand is non-uniform: some ids are hot (max {max})");
    }

    #[test]
    fn strings_have_their_lengths() {
        let mut r = TpccRng::new(1);
        for _ in 0..100 {
            let s = r.astring(8, 16);
            assert!((8..=16).contains(&s.len()));
            let d = r.data_with_original();
            assert!((26..=50).contains(&d.len()));
        }
        assert_eq!(r.zip().len(), 9);
    }
}
