//! Key choice for YCSB and KV: uniform, or Zipfian with skew `theta` as YCSB's
//! `requestdistribution=zipfian` (Gray et al., "Quickly generating billion-record synthetic
//! databases", SIGMOD 1994): the key of popularity rank `r` (1-based) is drawn with probability
//! `r^-theta / H(n, theta)`, where `H(n, theta) = sum_{k=1..n} k^-theta`.
//!
//! Ranks are drawn with `rand_distr::Zipf` (Hörmann and Derflinger's rejection-inversion method:
//! O(1) per draw, no O(n) set-up, any `theta >= 0`). Like YCSB's `ScrambledZipfianGenerator`, the
//! hot ranks are spread over the key space rather than being the smallest keys; unlike it, the
//! spreading is a bijection of `0..n` (an affine map `rank * m + c mod n` with `m` coprime to `n`),
//! so key frequencies are exactly the rank frequencies and no two hot ranks collide on a key.

use crate::bench::workload::WorkloadError;
use rand::Rng;
use rand_distr::{Distribution, Zipf};

/// Draws keys `0..n`, uniformly or Zipfian.
#[derive(Clone, Debug)]
pub struct KeyChooser {
    n: u64,
    zipf: Option<Zipf<f64>>,
    multiplier: u64,
    offset: u64,
}

impl KeyChooser {
    /// A chooser over `n` keys: uniform when `theta` is `None` or 0, else Zipfian with that skew.
    pub fn new(n: u64, theta: Option<f64>) -> Result<KeyChooser, WorkloadError> {
        if n == 0 {
            return Err(WorkloadError::Options("the key space is empty".into()));
        }
        let zipf = match theta {
            Some(t) if !(t.is_finite() && t >= 0.0) => {
                return Err(WorkloadError::Options(format!("zipf theta must be finite and >= 0, got {t}")));
            }
            None | Some(0.0) => None,
            Some(t) => Some(
                Zipf::new(n as f64, t)
                    .map_err(|e| WorkloadError::Options(format!("zipf(n = {n}, theta = {t}): {e}")))?,
            ),
        };
        let multiplier = coprime_near(n, (n as f64 * 0.618_033_988_749_895) as u64);
        Ok(KeyChooser { n, zipf, multiplier, offset: n / 3 })
    }

    /// A uniform chooser over `n` keys (`n` is taken as at least 1).
    pub fn uniform(n: u64) -> KeyChooser {
        let n = n.max(1);
        KeyChooser { n, zipf: None, multiplier: 1, offset: 0 }
    }

    /// The number of keys.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether there are no keys (never: [`KeyChooser::new`] refuses that).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether draws are Zipfian (not uniform).
    pub fn is_zipfian(&self) -> bool {
        self.zipf.is_some()
    }

    /// A popularity rank, 0-based: rank 0 is the most popular key.
    pub fn rank<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match &self.zipf {
            None => rng.random_range(0..self.n),
            Some(z) => (z.sample(rng) as u64).saturating_sub(1).min(self.n - 1),
        }
    }

    /// The key of 0-based popularity rank `rank` (a bijection of `0..n`).
    pub fn key_of_rank(&self, rank: u64) -> u64 {
        ((u128::from(rank) * u128::from(self.multiplier) + u128::from(self.offset)) % u128::from(self.n)) as u64
    }

    /// A key.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.key_of_rank(self.rank(rng))
    }

    /// Up to `N` distinct keys (all of them if `N <= n`): redraws a repeated key a few times, then
    /// takes the next unused key after it.
    pub fn distinct<R: Rng + ?Sized, const N: usize>(&self, rng: &mut R) -> [u64; N] {
        let mut keys = [0u64; N];
        for i in 0..N {
            let mut key = self.sample(rng);
            let mut tries = 0;
            while keys[..i].contains(&key) && i < self.n as usize {
                tries += 1;
                key = if tries < 16 { self.sample(rng) } else { (key + 1) % self.n };
            }
            keys[i] = key;
        }
        keys
    }
}

/// The theoretical probability of 0-based rank `rank` among `n` under Zipf(`theta`).
pub fn zipf_probability(n: u64, theta: f64, rank: u64) -> f64 {
    let harmonic: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
    ((rank + 1) as f64).powf(-theta) / harmonic
}

/// The first number at or after `start` (wrapping in `1..n`) that is coprime to `n`.
fn coprime_near(n: u64, start: u64) -> u64 {
    if n <= 2 {
        return 1;
    }
    let mut m = start.clamp(1, n - 1);
    while gcd(m, n) != 1 {
        m = if m + 1 >= n { 1 } else { m + 1 };
    }
    m
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn the_rank_to_key_map_is_a_bijection() {
        for n in [1u64, 2, 3, 10, 12, 97, 1000, 1024] {
            let c = KeyChooser::new(n, Some(0.99)).unwrap();
            let mut keys: Vec<u64> = (0..n).map(|r| c.key_of_rank(r)).collect();
            keys.sort_unstable();
            assert_eq!(keys, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn uniform_covers_every_key_and_distinct_keys_differ() {
        let c = KeyChooser::new(8, None).unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let mut seen = [false; 8];
        for _ in 0..1000 {
            seen[c.sample(&mut rng) as usize] = true;
            let k: [u64; 4] = c.distinct(&mut rng);
            assert!(k.iter().enumerate().all(|(i, a)| k[..i].iter().all(|b| a != b)));
        }
        assert!(seen.iter().all(|&s| s));
        let tiny = KeyChooser::new(2, Some(5.0)).unwrap();
        let k: [u64; 2] = tiny.distinct(&mut rng);
        assert_ne!(k[0], k[1]);
    }

    #[test]
    fn bad_thetas_are_refused() {
        assert!(KeyChooser::new(10, Some(-1.0)).is_err());
        assert!(KeyChooser::new(10, Some(f64::NAN)).is_err());
        assert!(KeyChooser::new(0, None).is_err());
        assert!(!KeyChooser::new(10, Some(0.0)).unwrap().is_zipfian());
    }
}
