"""The phone line model: G.711 bit-exactness, band-pass, SNR, Gilbert-Elliott losses, seeding."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from callbench.bundle.audio import AudioChannel, LineNoise, PacketLoss
from callbench.sim.voice import line

ALL_PCM = np.arange(-32768, 32768, dtype=np.int16)
ALL_CODES = np.arange(256, dtype=np.uint8)


def _audioop():  # CPython's C implementation of the ITU reference, gone after 3.12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return importlib.import_module("audioop")
        except ImportError:
            pytest.skip("audioop is not in this Python (removed in 3.13); the ITU table test still runs")


def test_g711_matches_audioop_bit_for_bit_on_every_sample_and_code() -> None:
    audioop = _audioop()
    raw = ALL_PCM.astype("<i2").tobytes()
    assert np.array_equal(line.ulaw_encode(ALL_PCM), np.frombuffer(audioop.lin2ulaw(raw, 2), np.uint8))
    assert np.array_equal(line.alaw_encode(ALL_PCM), np.frombuffer(audioop.lin2alaw(raw, 2), np.uint8))
    codes = ALL_CODES.tobytes()
    assert np.array_equal(line.ulaw_decode(ALL_CODES), np.frombuffer(audioop.ulaw2lin(codes, 2), "<i2"))
    assert np.array_equal(line.alaw_decode(ALL_CODES), np.frombuffer(audioop.alaw2lin(codes, 2), "<i2"))


def test_g711_reference_values() -> None:
    # G.711 tables: mu-law 0 -> 0xFF, -1 (-1 in 14 bits: magnitude 1 + bias 33) -> 0x7E, codes
    # 0x00/0x80 decode to -/+32124; A-law 0 -> 0xD5 (even-bit inversion), 0xD5/0x55 decode to +/-8
    # and 0xAA/0x2A to +/-32256
    assert line.ulaw_encode(np.array([0, -1, 32767, -32768], np.int16)).tolist() == [0xFF, 0x7E, 0x80, 0x00]
    assert line.ulaw_decode(np.array([0x00, 0x80, 0xFF, 0x7F], np.uint8)).tolist() == [-32124, 32124, 0, 0]
    assert line.alaw_encode(np.array([0, -1, 32767, -32768], np.int16)).tolist() == [0xD5, 0x55, 0xAA, 0x2A]
    assert line.alaw_decode(np.array([0xD5, 0x55, 0xAA, 0x2A], np.uint8)).tolist() == [8, -8, 32256, -32256]


def test_g711_round_trip_error_is_within_the_segment_step() -> None:
    pcm = np.array([100, 1000, 10000, -20000], np.int16)
    back = line.ulaw_decode(line.ulaw_encode(pcm)).astype(int)
    assert np.all(np.abs(back - pcm) <= np.array([4, 32, 512, 1024]))


def _tone(f: float, rate: int = line.LINE_RATE, n: int = 8000) -> np.ndarray:
    return np.sin(2 * np.pi * f * np.arange(n) / rate).astype(np.float32)


@pytest.mark.parametrize(
    ("freq", "lo_db", "hi_db"), [(100, -80, -20), (1000, -0.5, 0.5), (3000, -1, 0.5), (3900, -80, -15)]
)
def test_band_pass_keeps_the_telephone_band(freq: float, lo_db: float, hi_db: float) -> None:
    x = _tone(freq)
    y = line.band_pass(x)
    mid = slice(1000, 7000)
    gain = 20 * np.log10(np.std(y[mid]) / np.std(x[mid]))
    assert lo_db <= gain <= hi_db


@pytest.mark.parametrize("kind", ["white", "babble"])
def test_noise_is_added_at_the_requested_snr(kind: str) -> None:
    x = _tone(440, 16000, 32000) * 0.3
    y = line.add_noise(x, 16000, LineNoise(kind=kind, snr_db=10), np.random.default_rng(3))
    snr = 10 * np.log10(np.mean(x.astype(float) ** 2) / np.mean((y - x).astype(float) ** 2))
    assert snr == pytest.approx(10.0, abs=0.01)


def test_gilbert_elliott_rate_and_bursts() -> None:
    lost = line.loss_pattern(200_000, PacketLoss(rate=0.1, mean_burst=4.0), np.random.default_rng(7))
    assert lost.mean() == pytest.approx(0.1, abs=0.01)
    starts = np.flatnonzero(np.diff(lost.astype(int)) == 1)
    assert lost.sum() / len(starts) == pytest.approx(4.0, rel=0.1)  # mean burst length
    assert not line.loss_pattern(100, PacketLoss(rate=0.0), np.random.default_rng(7)).any()


def test_concealment_zero_and_repeat() -> None:
    x = np.arange(1, 5 * 160 + 1, dtype=np.float32)
    lost = np.array([False, True, False, False, True])
    z = line.conceal(x, lost, "zero", 160)
    assert not z[160:320].any() and np.array_equal(z[320:640], x[320:640])
    r = line.conceal(x, lost, "repeat", 160)
    assert np.array_equal(r[160:320], x[0:160]) and np.array_equal(r[640:800], x[480:640])


def test_the_line_replays_exactly_from_its_seed_and_differs_across_seeds() -> None:
    pytest.importorskip("soxr", reason="the line resamples with soxr: pip install 'callbench[audio]'")
    audio = line.Audio(_tone(700, 22050, 22050) * 0.3, 22050)
    cfg = AudioChannel(
        noise=LineNoise(kind="white", snr_db=15), packet_loss=PacketLoss(rate=0.2, mean_burst=3)
    )
    a = line.run_line(audio, cfg, np.random.default_rng([1, 2, 0]))
    b = line.run_line(audio, cfg, np.random.default_rng([1, 2, 0]))
    c = line.run_line(audio, cfg, np.random.default_rng([1, 2, 1]))
    assert a.audio.rate == 16000 and abs(len(a.audio.samples) - 16000) <= 2
    assert np.array_equal(a.audio.samples, b.audio.samples) and a.lost_frames == b.lost_frames
    assert not np.array_equal(a.audio.samples, c.audio.samples)
    assert a.frames == 50 and 0 < a.lost_frames < 50


def test_wav_round_trip_and_bad_wav_is_a_located_error() -> None:
    audio = line.Audio(_tone(440, 8000, 800) * 0.5, 8000)
    back = line.read_wav(line.write_wav(audio))
    assert back.rate == 8000 and np.max(np.abs(back.samples - audio.samples)) < 1e-4
    with pytest.raises(ValueError, match=r"noise\.wav: not a readable PCM WAV"):
        line.read_wav(b"RIFF nonsense", where="noise.wav")


def test_babble_is_shaped_at_a_fast_fft_length_and_cut_to_the_utterance() -> None:
    from callbench.sim.voice.line import babble, fast_len

    # 5-smooth lengths: an utterance of a prime number of samples is not filtered at that length
    assert [fast_len(n) for n in (1, 7, 11, 66151, 100003, 65536)] == [1, 8, 12, 67500, 101250, 65536]
    x = babble(100003, 22050, np.random.default_rng(3))
    assert x.shape == (100003,) and x.dtype == np.float32 and float(np.abs(x).max()) > 0
