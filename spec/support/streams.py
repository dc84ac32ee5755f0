# The output generator of the exec-resume specs and bench/cuts.lua: stdout
# and stderr together, deterministic from a seed, UTF-8 text with 2- and
# 4-byte characters written in pieces of random sizes (so that cuts land
# inside characters), each stream ending on a whole character. It runs in
# a sandbox as `python3 -c "$(cat streams.py)" SEED BYTES SHARE`.
# argv: seed, bytes (both streams together), the share that goes to stderr
import os, random, sys
seed, total, share = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(seed)
words = ["run", "caf\u00e9", "\u00fcber", "\U0001d11e", "\u20ac", "x" * 7, "\n", " ", "ok"]
block = "".join(rng.choice(words) for _ in range(20000)).encode()
pos = [0, 0]
left = total
while left > 0:
    fd = 2 if rng.random() < share else 1
    n = min(left, rng.randint(1, 70000))
    i = pos[fd - 1]
    data = (block * (2 + n // len(block)))[i % len(block):i % len(block) + n]
    os.write(fd, data)
    pos[fd - 1] += n
    left -= n
for fd in (1, 2):
    # end each stream on a whole character
    while block[pos[fd - 1] % len(block)] & 0xC0 == 0x80:
        os.write(fd, block[pos[fd - 1] % len(block):pos[fd - 1] % len(block) + 1])
        pos[fd - 1] += 1
