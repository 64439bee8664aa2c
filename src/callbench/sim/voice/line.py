"""The phone line: what happens to the caller's audio between their mouth and the recogniser.

Stages, in this order (each seeded, so a line replays exactly):

1. additive noise at an SNR (white, synthetic babble, or a WAV file), at the synthesis rate;
2. resampling to 8 kHz with soxr (libsoxr, "HQ"), the narrowband telephone rate;
3. telephone band-pass 300-3400 Hz (ITU-T G.712's passband): a linear-phase windowed-sinc FIR,
   257 taps, Hamming window;
4. G.711 mu-law or A-law encode and decode (bit-exact with the ITU reference code as shipped in
   CPython's ``audioop``: 14-bit input for mu-law, 13-bit for A-law);
5. packet loss over 20 ms frames (160 samples) from a Gilbert-Elliott two-state chain, lost frames
   zero-filled or repeated (the simplest concealments a gateway does);
6. resampling to 16 kHz for the recogniser.

Audio is a float32 mono array in [-1, 1]. Every random draw comes from the numpy ``Generator``
passed in, which :mod:`callbench.sim.voice.pipeline` seeds from the episode's channel seed.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from callbench.bundle.audio import AudioChannel, LineNoise, PacketLoss

LINE_RATE = 8000
ASR_RATE = 16000
FRAME_MS = 20
_TAPS = 257


@dataclass(frozen=True)
class Audio:
    """Mono audio: ``samples`` float32 in [-1, 1], ``rate`` in Hz."""

    samples: np.ndarray
    rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / float(self.rate)


# ------------------------------------------------------------------ WAV I/O (stdlib only)


def read_wav(data: bytes | Path, *, where: str = "audio") -> Audio:
    """Decode a PCM WAV (8/16/32-bit integer, any channel count: mixed to mono).

    Raises ``ValueError`` naming ``where`` for anything else."""
    try:
        src = io.BytesIO(data) if isinstance(data, bytes) else open(data, "rb")  # noqa: SIM115
        with src, wave.open(src, "rb") as w:
            width, channels, rate = w.getsampwidth(), w.getnchannels(), w.getframerate()
            raw = w.readframes(w.getnframes())
    except (OSError, EOFError, wave.Error) as e:
        raise ValueError(f"{where}: not a readable PCM WAV file: {e}") from None
    if width == 1:
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 4:
        x = np.frombuffer(raw, "<i4").astype(np.float32) / 2147483648.0
    else:
        raise ValueError(f"{where}: {8 * width}-bit WAV samples are not supported (8, 16 or 32-bit PCM)")
    if channels > 1:
        x = x.reshape(-1, channels).mean(axis=1)
    return Audio(x.astype(np.float32), rate)


def to_pcm16(x: np.ndarray) -> np.ndarray:
    """Float samples in [-1, 1] to int16 (rounded, clipped)."""
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


def write_wav(audio: Audio) -> bytes:
    """16-bit mono PCM WAV bytes of ``audio``."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(audio.rate)
        w.writeframes(to_pcm16(audio.samples).astype("<i2").tobytes())
    return buf.getvalue()


# ------------------------------------------------------------------ resampling and filtering


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Resample with soxr ("HQ"). Raises ``RuntimeError`` when soxr (the ``[audio]`` extra) is missing."""
    if rate_in == rate_out:
        return x.astype(np.float32)
    try:
        import soxr
    except ImportError:
        raise RuntimeError("the voice channel needs soxr: pip install 'callbench[audio]'") from None
    return np.asarray(soxr.resample(x.astype(np.float32), rate_in, rate_out, quality="HQ"), np.float32)


def band_pass_taps(
    rate: int = LINE_RATE, low: float = 300.0, high: float = 3400.0, taps: int = _TAPS
) -> np.ndarray:
    """Windowed-sinc band-pass FIR (Hamming), unit gain at the band centre; ``taps`` odd."""
    n = np.arange(taps) - (taps - 1) / 2.0

    def lowpass(fc: float) -> np.ndarray:
        return 2.0 * fc / rate * np.sinc(2.0 * fc / rate * n)

    h = (lowpass(high) - lowpass(low)) * np.hamming(taps)
    centre = np.sqrt(low * high)
    gain = abs(np.sum(h * np.exp(-2j * np.pi * centre / rate * np.arange(taps))))
    return (h / gain).astype(np.float64)


def band_pass(x: np.ndarray, rate: int = LINE_RATE) -> np.ndarray:
    """The telephone band (300-3400 Hz) of ``x`` at ``rate``; same length, zero delay."""
    return np.convolve(x.astype(np.float64), band_pass_taps(rate), mode="same").astype(np.float32)


# ------------------------------------------------------------------ G.711

_SEG_UEND = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], np.int32)
_SEG_AEND = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], np.int32)


def _segment(mag: np.ndarray, ends: np.ndarray) -> np.ndarray:
    # the reference code's search(): the first segment whose end is >= the magnitude, 8 if none
    return np.searchsorted(ends, mag, side="left").astype(np.int32)


def ulaw_encode(pcm: np.ndarray) -> np.ndarray:
    """G.711 mu-law codes (uint8) of int16 samples, as the ITU/Sun reference ``linear2ulaw`` on
    the top 14 bits (CPython ``audioop.lin2ulaw(..., 2)``)."""
    v = pcm.astype(np.int32) >> 2
    mask = np.where(v < 0, 0x7F, 0xFF)
    mag = np.abs(v) + (0x84 >> 2)
    seg = _segment(mag, _SEG_UEND)
    code = np.where(seg >= 8, 0x7F, (np.minimum(seg, 7) << 4) | ((mag >> (np.minimum(seg, 7) + 1)) & 0xF))
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def ulaw_decode(codes: np.ndarray) -> np.ndarray:
    """int16 samples of G.711 mu-law codes (the reference ``ulaw2linear``, 16-bit output)."""
    u = (~codes.astype(np.int32)) & 0xFF
    t = (((u & 0xF) << 3) + 0x84) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, 0x84 - t, t - 0x84).astype(np.int16)


def alaw_encode(pcm: np.ndarray) -> np.ndarray:
    """G.711 A-law codes (uint8) of int16 samples, as the reference ``linear2alaw`` on the top
    13 bits (CPython ``audioop.lin2alaw(..., 2)``)."""
    v = pcm.astype(np.int32) >> 3
    neg = v < 0
    mask = np.where(neg, 0x55, 0xD5)
    mag = np.where(neg, -v - 1, v)
    seg = _segment(mag, _SEG_AEND)
    s = np.minimum(seg, 7)
    quant = np.where(s < 2, mag >> 1, mag >> np.maximum(s, 1)) & 0xF
    code = np.where(seg >= 8, 0x7F, (s << 4) | quant)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def alaw_decode(codes: np.ndarray) -> np.ndarray:
    """int16 samples of G.711 A-law codes (the reference ``alaw2linear``, 16-bit output)."""
    a = codes.astype(np.int32) ^ 0x55
    t = (a & 0xF) << 4
    seg = (a & 0x70) >> 4
    t = np.where(seg == 0, t + 8, t + 0x108)
    t = np.where(seg > 1, t << np.maximum(seg - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


def g711(x: np.ndarray, codec: str) -> np.ndarray:
    """Encode and decode float samples through G.711 ``pcmu`` or ``pcma`` (``none``: unchanged)."""
    if codec == "none":
        return x
    pcm = to_pcm16(x)
    out = ulaw_decode(ulaw_encode(pcm)) if codec == "pcmu" else alaw_decode(alaw_encode(pcm))
    return (out.astype(np.float32) / 32768.0).astype(np.float32)


# ------------------------------------------------------------------ noise


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if len(x) else 0.0


def fast_len(n: int) -> int:
    """The smallest length >= ``n`` whose prime factors are 2, 3 and 5: an FFT of a length with a
    large prime factor (an utterance's sample count often has one) costs up to 10x more."""
    best, p2 = 2 * max(n, 1), 1
    while p2 < best:
        p3 = p2
        while p3 < best:
            p5 = p3
            while p5 < n:
                p5 *= 5
            best = min(best, p5)
            p3 *= 3
        p2 *= 2
    return best


def babble(n: int, rate: int, rng: np.random.Generator, talkers: int = 6) -> np.ndarray:
    """Synthetic babble: ``talkers`` streams of speech-shaped noise (pink-ish spectrum falling
    about 6 dB per octave above 500 Hz), each gated by its own random 2-6 Hz syllable envelope.
    A stand-in for recorded babble (use ``noise.kind: file`` for a recording). The noise is shaped
    at :func:`fast_len` samples and cut to ``n``."""
    m = fast_len(n)
    freqs = np.fft.rfftfreq(m, 1.0 / rate)
    shape = 1.0 / np.maximum(freqs, 500.0) * np.where(freqs < 100.0, 0.0, 1.0)
    t = np.arange(n) / rate
    out = np.zeros(n, np.float64)
    for _ in range(talkers):
        spec = np.fft.rfft(rng.standard_normal(m)) * shape
        voice = np.fft.irfft(spec, m)[:n]
        rate_hz = rng.uniform(2.0, 6.0)
        env = np.maximum(0.0, np.sin(2 * np.pi * rate_hz * t + rng.uniform(0, 2 * np.pi))) ** 2
        env *= rng.uniform(0.5, 1.0)
        out += voice * env
    return out.astype(np.float32)


def load_noise_file(path: Path, rate: int) -> np.ndarray:
    """A noise recording at ``rate`` (mono, resampled). Raises ``ValueError`` naming the file."""
    audio = read_wav(path, where=str(path))
    if len(audio.samples) == 0:
        raise ValueError(f"{path}: the noise file holds no samples")
    return resample(audio.samples, audio.rate, rate)


def add_noise(
    x: np.ndarray, rate: int, noise: LineNoise, rng: np.random.Generator, noise_file: np.ndarray | None = None
) -> np.ndarray:
    """``x`` plus noise scaled so that 10*log10(P_signal / P_noise) == ``noise.snr_db``.

    A file's noise is looped and starts at a seeded offset. Silent input stays silent."""
    if noise.kind == "none" or len(x) == 0:
        return x
    if noise.kind == "white":
        n = rng.standard_normal(len(x)).astype(np.float32)
    elif noise.kind == "babble":
        n = babble(len(x), rate, rng)
    else:
        if noise_file is None:
            raise ValueError("noise kind 'file' needs its samples loaded (load_noise_file)")
        start = int(rng.integers(0, len(noise_file)))
        n = np.resize(np.roll(noise_file, -start), len(x)).astype(np.float32)
    ps, pn = _rms(x), _rms(n)
    if ps == 0.0 or pn == 0.0:
        return x
    scale = ps / (pn * 10.0 ** (noise.snr_db / 20.0))
    return (x + scale * n).astype(np.float32)


# ------------------------------------------------------------------ packet loss


def loss_pattern(frames: int, loss: PacketLoss, rng: np.random.Generator) -> np.ndarray:
    """Lost-frame flags (bool, one per 20 ms frame) from a Gilbert-Elliott chain whose bad state
    loses every frame: P(bad->good) = 1/mean_burst, P(good->bad) = rate*r/(1-rate), so the
    stationary loss rate is ``rate``; the first state is drawn from the stationary law."""
    lost = np.zeros(frames, bool)
    if loss.rate <= 0.0 or frames == 0:
        return lost
    r = 1.0 / loss.mean_burst
    p = min(1.0, loss.rate * r / (1.0 - loss.rate))
    u = rng.random(frames + 1)
    bad = bool(u[0] < loss.rate)
    for i in range(frames):
        lost[i] = bad
        bad = (u[i + 1] >= r) if bad else (u[i + 1] < p)
    return lost


def conceal(x: np.ndarray, lost: np.ndarray, how: str, frame: int) -> np.ndarray:
    """Replace lost frames of ``x`` (``frame`` samples each) by silence or the last good frame."""
    y = x.copy()
    last = np.zeros(frame, np.float32)
    for i, gone in enumerate(lost):
        seg = slice(i * frame, min((i + 1) * frame, len(y)))
        width = seg.stop - seg.start
        if gone:
            y[seg] = 0.0 if how == "zero" else last[:width]
        elif width == frame:
            last = y[seg].copy()
    return y


# ------------------------------------------------------------------ the whole line


@dataclass(frozen=True)
class LineResult:
    """The line's output for the recogniser (16 kHz) and what happened on it."""

    audio: Audio
    lost_frames: int
    frames: int


def run_line(
    audio: Audio, cfg: AudioChannel, rng: np.random.Generator, noise_file: np.ndarray | None = None
) -> LineResult:
    """Carry ``audio`` over the line ``cfg`` (stages in the module docstring); output at 16 kHz."""
    x = add_noise(audio.samples, audio.rate, cfg.noise, rng, noise_file)
    x = resample(x, audio.rate, LINE_RATE)
    if cfg.band_pass:
        x = band_pass(x, LINE_RATE)
    x = g711(np.clip(x, -1.0, 1.0), cfg.codec)
    frame = LINE_RATE * FRAME_MS // 1000
    frames = -(-len(x) // frame)
    lost = loss_pattern(frames, cfg.packet_loss, rng)
    if lost.any():
        x = conceal(x, lost, cfg.packet_loss.conceal, frame)
    out = resample(x, LINE_RATE, ASR_RATE)
    return LineResult(Audio(np.clip(out, -1.0, 1.0).astype(np.float32), ASR_RATE), int(lost.sum()), frames)
