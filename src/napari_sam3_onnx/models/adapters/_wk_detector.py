"""The concept-detector role of the wkentaro (v0.3/v0.6) and samexporter bundles.

The language encoder takes ``tokens [1, context]`` int64 (0-padded, upstream) and the concept
decoder takes image features, the decoder-side names of the text features (``language_mask``,
``language_features``, ``language_embeds``), the image-independent position encodings, exemplar
slots and, in some exports, ``original_height/width`` (docs/layouts.md#wkentaro-v03).
How the decoder's outputs become :class:`Detections` differs per layout and is given as a
function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..base import Capability, Detections, Embedding, TextEmbedding
from ..errors import CapabilityError
from ..runtime import LazySession
from ._common import fixed_dim
from ._concepts import as_declared, exemplar_slots, token_feed

SLOT_INPUTS = ("box_coords", "box_labels", "box_masks")
SIZE_INPUTS = ("original_height", "original_width")


@dataclass
class WkDetector:
    """Language encoder + concept decoder, as a :class:`~..roles.ConceptDetector`.

    Attributes
    ----------
    language, decoder : LazySession
        The two graphs.
    layout : str
        For messages.
    image_names : tuple of str
        Encoder outputs the decoder takes (position encodings excluded).
    text_names : dict of str to str
        Decoder input -> language-encoder output.
    slots : int or None
        Exemplar slots (None: dynamic); meaningful only when ``has_slots``.
    has_slots : bool
        Whether the decoder takes exemplar boxes at all.
    outputs : tuple of str
        Decoder outputs to fetch.
    constants : callable
        Returns the position encodings the decoder takes, by name (the encoder's).
    detections : callable
        Turns the decoder's named outputs into :class:`Detections`.
    min_score : float
        The score cut inside the decoder graph (0.0: none).
    """

    language: LazySession
    decoder: LazySession
    layout: str
    image_names: tuple[str, ...]
    text_names: dict[str, str]
    slots: int | None
    has_slots: bool
    outputs: tuple[str, ...]
    constants: Callable[[], Mapping[str, np.ndarray]]
    detections: Callable[[Mapping[str, np.ndarray], tuple[int, int]], Detections]
    min_score: float = 0.0

    @property
    def context_length(self) -> int:
        """Token context length of the language encoder (its ``tokens`` dim 1)."""
        return fixed_dim(self.language.signature.input("tokens"), 1, self.layout,
                         self.language.path.name)

    @property
    def max_exemplars(self) -> int | None:
        """Exemplar-box slots of the decoder (None: dynamic or none)."""
        return self.slots

    def encode_text(self, token_ids: Sequence[int], text: str = "") -> TextEmbedding:
        """Run the language encoder on CLIP ids (start/end included); pads with 0 (upstream)."""
        feed = token_feed(token_ids, self.context_length, pad=0)
        wanted = sorted(set(self.text_names.values()))
        out = self.language.run(wanted, {"tokens": feed})
        features = {dec: out[src] for dec, src in self.text_names.items()}
        return TextEmbedding(text or " ".join(str(int(t)) for t in token_ids), features)

    def decoder_feeds(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """Everything the concept decoder declares, from an embedding, a text and exemplars."""
        given = boxes_cxcywh is not None and len(boxes_cxcywh) > 0
        if given and not self.has_slots:
            raise CapabilityError(self.layout, Capability.EXEMPLARS.value)
        missing = [n for n in self.image_names if n not in embedding.features]
        missing += [n for n in self.text_names if n not in text.features]
        if missing:
            raise ValueError(
                f"The embedding or text given to the {self.layout} bundle lacks {missing}; it "
                "was made by another bundle. Encode the image and the text with this one."
            )
        feeds = {**self.constants(), **embedding.features, **text.features}
        sig = self.decoder.signature
        if self.has_slots:
            coords, labels, padding = exemplar_slots(boxes_cxcywh, box_labels, self.slots,
                                                     self.layout)
            for name, value in zip(SLOT_INPUTS, (coords, labels, padding), strict=True):
                feeds[name] = as_declared(value, sig.input(name))
        for axis, name in enumerate(SIZE_INPUTS):
            if name in sig.input_names:
                feeds[name] = as_declared(embedding.image_shape[axis], sig.input(name))
        return feeds

    def detect(
        self,
        embedding: Embedding,
        text: TextEmbedding,
        boxes_cxcywh: np.ndarray | None = None,
        box_labels: np.ndarray | None = None,
    ) -> Detections:
        """Detect the concept; exemplar boxes ``(K, 4)`` cx, cy, w, h normalised to [0, 1]."""
        feeds = self.decoder_feeds(embedding, text, boxes_cxcywh, box_labels)
        return self.detections(self.decoder.run(self.outputs, feeds), embedding.image_shape)
