"""Minimal ctypes binding of libespeak-ng (bundled by the PyPI wheel ``espeakng-loader``) with phoneme events.

``synthesize(text)`` returns the int16 waveform at 22050 Hz and the phoneme events with their exact sample offsets.
Text is passed with ``espeakPHONEMES`` so ``[[...]]`` spans are read as espeak phoneme mnemonics. The library keeps
global state: calls are serialised with a lock.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

_EVENT_WORD, _EVENT_PHONEME, _EVENT_END = 1, 7, 5
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_PHONEME_EVENTS = 1
_CHARS_UTF8, _PHONEMES = 1, 0x100
_PARAM_RATE, _PARAM_PITCH = 1, 3


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


@dataclass
class PhonemeEvent:
    phoneme: str  # espeak mnemonic, stress marks removed
    sample: int  # sample offset of the phoneme's start in the 22050 Hz output


class Espeak:
    """Process-wide espeak-ng synthesizer (lazily initialised)."""

    _lock = threading.Lock()
    _lib = None
    _rate = 0

    @classmethod
    def available(cls) -> bool:
        try:
            import espeakng_loader  # noqa: F401
        except ImportError:
            return False
        return True

    @classmethod
    def _init(cls):
        if cls._lib is not None:
            return cls._lib
        try:
            import espeakng_loader
        except ImportError as err:
            raise RuntimeError(
                "synthetic speech needs espeak-ng: pip install espeakng-loader (bundles libespeak-ng and its data)"
            ) from err
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        rate = lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), _INIT_PHONEME_EVENTS
        )
        if rate <= 0:
            raise RuntimeError(f"espeak_Initialize failed (returned {rate})")
        cls._lib, cls._rate = lib, rate
        return lib

    @classmethod
    def synthesize(
        cls, text: str, voice: str = "en", rate: int = 175, pitch: int = 50
    ) -> tuple[np.ndarray, list[PhonemeEvent], int]:
        """Synthesize ``text``; returns (int16 waveform, phoneme events, sample rate)."""
        with cls._lock:
            lib = cls._init()
            chunks: list[np.ndarray] = []
            events: list[PhonemeEvent] = []

            def callback(wav, n, ev):
                if n > 0:
                    chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
                i = 0
                while ev[i].type != 0:
                    if ev[i].type == _EVENT_PHONEME:
                        name = ev[i].id.string.decode("utf-8", "replace").replace("'", "").replace(",", "")
                        events.append(PhonemeEvent(name, int(ev[i].sample)))
                    i += 1
                return 0

            cb = _CALLBACK(callback)
            lib.espeak_SetSynthCallback(cb)
            if lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise ValueError(f"espeak-ng has no voice {voice!r}")
            lib.espeak_SetParameter(_PARAM_RATE, int(rate), 0)
            lib.espeak_SetParameter(_PARAM_PITCH, int(pitch), 0)
            data = text.encode("utf-8")
            err = lib.espeak_Synth(data, len(data) + 1, 0, 1, 0, _CHARS_UTF8 | _PHONEMES, None, None)
            if err != 0:
                raise RuntimeError(f"espeak_Synth failed with error {err}")
            wav = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
            return wav, events, cls._rate
