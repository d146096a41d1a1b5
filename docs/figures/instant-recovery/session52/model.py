"""The read-only restore as a model (session 52): the walk takes share s(p) of C cores at restored
fraction p and restores k CPU-seconds a key; the rest serves requests at a + (1 - p) * b CPU-seconds
each (a: a request during the restore, b: what a miss adds: the fetch and its hand-offs). Prints
the restore time and the mean request rate during it over the steady rate (C / a0).
Costs from this session's profiles: a0 = 16.8 us (loops + driver after the restore), a = 1.2 a0,
b = 18 us, k = 0.9 us; 5 M keys, 2 cores. The default schedule is linear from 0.77 to 0.14
(--restore-cpu-share 0.35, --restore-front-load 0.6)."""
C = 2
N = 5e6
A0 = 16.8e-6


def run(share, a, b, k, n=400):
    t = req = 0.0
    for i in range(n):
        p = (i + 0.5) / n
        s = share(p)
        dt = k * N / (s * C) / n
        t += dt
        req += (1 - s) * C / (a + (1 - p) * b) * dt
    return round(t, 2), round(req / t / (C / A0), 3)


def linear(s0, s1):
    return lambda p: s0 + (s1 - s0) * p


for name, a, b, k in [
    ("base", 1.2 * A0, 18e-6, 0.9e-6),
    ("a miss 30 % cheaper", 1.2 * A0, 12.6e-6, 0.9e-6),
    ("the walk 20 % cheaper", 1.2 * A0, 18e-6, 0.72e-6),
    ("requests 1.1 a0 during", 1.1 * A0, 18e-6, 0.9e-6),
]:
    best = None
    for i in range(4, 20):
        for j in range(1, 12):
            t, r = run(linear(i * 0.05, j * 0.05), a, b, k)
            if t <= 6.5 and (best is None or r > best[0]):
                best = (r, t, round(i * 0.05, 2), round(j * 0.05, 2))
    print(f"{name}: default schedule (restore s, during / after) {run(linear(0.77, 0.14), a, b, k)}; "
          f"best linear schedule with a restore <= 6.5 s (ratio, s, start, end) {best}")
