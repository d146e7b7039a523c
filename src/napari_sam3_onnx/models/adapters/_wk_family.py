"""Parts wkentaro (v0.3/v0.6) and samexporter bundles share: encoders and decoder feeds.

Contract (docs/layouts.md#wkentaro-v03, #samexporter-05): the image encoder takes ``image``
uint8 ``[3,S,S]`` (normalisation inside) and returns ``backbone_fpn_0..2`` and
``vision_pos_enc_0..2``; the language encoder takes ``tokens [1,32]`` int64 (0-padded) and
returns ``text_attention_mask`` (True = pad), ``text_memory``, ``text_embeds``; the concept
decoder takes some of those (``language_mask`` = ``text_attention_mask``, ``language_features`` =
``text_memory``, ``language_embeds`` = ``text_embeds``) plus ``box_coords [K,1,4]``,
``box_labels [K,1]``, ``box_masks [1,K]`` and, in some exports, ``original_height/width``.

Only the encoder outputs the decoders declare are requested. The vision position encodings are
image-independent sine maps (docs/layouts.md#wkentaro-v03), so the ones a decoder takes are
fetched with the first encode and kept once per adapter, not per embedding.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
from typing_extensions import override

from ..base import Detections, Embedding, SamAdapter
from ..errors import LayoutMismatchError
from ..graph_info import GraphSignature
from ..runtime import LazySession, RuntimeConfig
from . import _assumptions as asm
from ._common import as_float32, encoder_feed, require_names, spatial_size
from ._concepts import find_graph, slot_count
from ._wk_detector import SIZE_INPUTS, SLOT_INPUTS, WkDetector

FPN = ("backbone_fpn_0", "backbone_fpn_1", "backbone_fpn_2")
POS_PREFIX = "vision_pos_enc_"
TEXT_MAP = {"language_mask": "text_attention_mask", "language_features": "text_memory",
            "language_embeds": "text_embeds"}
WANTED = {
    "encoder": "input 'image' -> backbone_fpn_0..2, vision_pos_enc_0..2",
    "language": "input 'tokens' -> text_attention_mask, text_memory, text_embeds",
    "decoder": "backbone_fpn_*, language_mask, language_features, box_coords -> detections",
}


def find_image_encoder(graphs: Mapping[str, GraphSignature]) -> GraphSignature | None:
    """The graph taking ``image`` and returning ``backbone_fpn_0..2``."""
    return find_graph(graphs, ["image"], FPN)


def find_language_encoder(graphs: Mapping[str, GraphSignature]) -> GraphSignature | None:
    """The graph taking ``tokens`` and returning ``text_attention_mask`` and ``text_memory``."""
    return find_graph(graphs, ["tokens"], ["text_attention_mask", "text_memory"])


class WkFamilyAdapter(SamAdapter):
    """Base of the wkentaro and samexporter adapters.

    Subclasses set ``layout``, ``decoder_outputs`` and ``mask_output`` and turn the decoder's
    outputs into :class:`~napari_sam3_onnx.models.base.Detections` in :meth:`_detections`.
    """

    decoder_outputs: tuple[str, ...] = ()
    mask_output: str = ""
    #: The score cut traced into the decoder graph (0.0: raw heads).
    score_cut: float = 0.0

    def __init__(self, graphs: Mapping[str, GraphSignature], config: RuntimeConfig) -> None:
        enc, lang, dec = graphs["encoder"], graphs["language"], graphs["decoder"]
        require_names(enc, self.layout, ["image"], FPN)
        require_names(lang, self.layout, ["tokens"], ["text_attention_mask", "text_memory"])
        require_names(dec, self.layout, ["language_mask", "language_features"],
                      self.decoder_outputs)
        self.encoder = LazySession(enc.path, config)
        self.language = LazySession(lang.path, config)
        self.decoder = LazySession(dec.path, config)
        self._image = enc.input("image")
        names = [t.name for t in dec.inputs]
        known = enc.output_names | set(TEXT_MAP) | set(SLOT_INPUTS) | set(SIZE_INPUTS)
        unknown = [n for n in names if n not in known]
        no_text = [TEXT_MAP[n] for n in names
                   if n in TEXT_MAP and TEXT_MAP[n] not in lang.output_names]
        if unknown or no_text:
            raise LayoutMismatchError(
                self.layout, dec.path.name,
                f"its inputs {unknown + no_text} are produced by no graph of the bundle "
                f"(encoder outputs: {sorted(enc.output_names)}; language encoder outputs: "
                f"{sorted(lang.output_names)})",
            )
        self._constant_names = tuple(n for n in names if n.startswith(POS_PREFIX))
        self._image_names: tuple[str, ...] = tuple(
            n for n in names if n in enc.output_names and not n.startswith(POS_PREFIX))
        self._has_slots = set(SLOT_INPUTS) <= set(names)
        self._slots = slot_count(dec.input("box_coords"), 0) if self._has_slots else None
        self._constants: dict[str, np.ndarray] | None = None
        self._lock = threading.Lock()
        #: The concept-detector role (language encoder + concept decoder).
        self.concepts = WkDetector(
            language=self.language, decoder=self.decoder, layout=self.layout,
            image_names=self._image_names,
            text_names={n: TEXT_MAP[n] for n in names if n in TEXT_MAP},
            slots=self._slots, has_slots=self._has_slots, outputs=self.decoder_outputs,
            constants=self.constants, detections=self._detections, min_score=self.score_cut,
        )
        self._attach_detector(self.concepts, exemplars=self._has_slots)  # text (+ exemplars)

    @override
    def assumptions(self) -> dict[str, tuple[str, str]]:
        """See the base class."""
        kind = "probabilities" if self.mask_output == "masks" else "logits"
        return {
            "normalisation": asm.normalisation(self._image, self.encoder.path.name),
            "mask kind": (kind, f"{self.decoder.path.name} output {self.mask_output}"),
            "score cut": ((f"{self.score_cut} inside the graph" if self.score_cut else
                           "none (sigmoid(logit) * sigmoid(presence); caller's floor)"),
                          asm.CONTRACT),
            "exemplar slots": (str(self._slots) if self._has_slots else "none",
                               f"{self.decoder.path.name} box_coords dim 0"),
            "padding": asm.no_prompt_decoder(),
        }

    # ---- geometry ----------------------------------------------------------------------
    @property
    @override
    def input_size(self) -> tuple[int, int]:
        return spatial_size(self._image, self.layout, self.encoder.path.name)

    @property
    @override
    def mask_size(self) -> tuple[int, int]:
        h, w = self.decoder.signature.output(self.mask_output).shape[-2:]
        if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
            return h, w
        return spatial_size(self.encoder.signature.output(FPN[0]), self.layout,
                            self.encoder.path.name)

    # ---- operations --------------------------------------------------------------------
    def encode(self, rgb: np.ndarray) -> Embedding:
        """Encode one ``(rows, cols, 3)`` uint8 RGB image; see the base class."""
        feed = encoder_feed(rgb, self._image, self.layout, self.encoder.path.name)
        first = self._constants is None
        names = list(self._image_names) + (list(self._constant_names) if first else [])
        out = as_float32(self.encoder.run(names, {"image": feed}))
        if first:
            with self._lock:
                self._constants = {n: out.pop(n) for n in self._constant_names}
        return Embedding(out, self.input_size, (int(rgb.shape[0]), int(rgb.shape[1])))

    def constants(self) -> dict[str, np.ndarray]:
        """The position encodings the decoder takes, by name.

        If this adapter has encoded no image yet (e.g. for an embedding loaded from a cache) they
        are fetched by one encoder run on a blank image.
        """
        if self._constants is None and self._constant_names:
            blank = np.zeros((*self.input_size, 3), np.uint8)
            feed = encoder_feed(blank, self._image, self.layout, self.encoder.path.name)
            out = as_float32(self.encoder.run(list(self._constant_names), {"image": feed}))
            with self._lock:
                self._constants = out
        return dict(self._constants or {})

    def _detections(self, out: Mapping[str, np.ndarray],
                    image_shape: tuple[int, int]) -> Detections:
        raise NotImplementedError

    @override
    def close(self) -> None:
        for session in (self.encoder, self.language, self.decoder):
            session.close()
