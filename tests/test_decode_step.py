"""The one decode step: hole-filled logits are shown, the decoder's own logits are fed back."""

import numpy as np

from napari_sam3_onnx.engine.encoding import SliceEncoder, SliceRef
from napari_sam3_onnx.engine.postprocess import hole_area_for
from napari_sam3_onnx.engine.tracking.propagation import Seed, propagate
from napari_sam3_onnx.models.base import Embedding, MaskCandidates, SamAdapter

#: Low-res mask size: holes up to hole_area_for((40, 56)) = 7 px are filled for display.
LOW = (40, 56)
#: The ring the decoder answers: a square at low-res rows 10-21, cols 20-35 with a 2x2 hole.
RING, HOLE = (slice(10, 22), slice(20, 36)), (slice(15, 17), slice(27, 29))


class _RingCarryOver(SamAdapter):
    """A decoder without memory graphs that always answers one ring; it records its mask prompts.

    Every slice gets the same answer, so carry-over follows it; the 4-pixel hole is below the
    click path's fill area, so the display fills it while the decoder's logits keep it.
    """

    layout = "ring-carry-over"

    def __init__(self) -> None:
        self._attach_prompt_decoder(self)  # its own prompt-decoder role (a test double)
        self.mask_inputs: list[np.ndarray | None] = []

    @property
    def input_size(self):
        return (80, 112)

    @property
    def mask_size(self):
        return LOW

    @property
    def accepts_mask_input(self):
        return True

    def encode(self, rgb):
        return Embedding({"f": np.zeros(1, np.float32)}, self.input_size, rgb.shape[:2])

    def predict_masks(self, embedding, points_xy, labels, mask_input=None):
        self.mask_inputs.append(None if mask_input is None else np.array(mask_input))
        logits = np.full((1, *LOW), -8.0, np.float32)
        logits[0][RING] = 8.0
        logits[0][HOLE] = -8.0
        return MaskCandidates(logits, np.array([0.9], np.float32), 3.0, False)


def test_carry_over_feeds_back_the_decoders_logits_not_the_filled_display():
    assert 4 < hole_area_for(LOW)  # the hole is small enough to be filled for display
    adapter = _RingCarryOver()
    stack = np.zeros((4, 60, 84), np.uint8)  # slices are 1.5x the low-res mask
    refs = [SliceRef(stack, (k,), source="s") for k in range(4)]
    res = propagate(adapter, SliceEncoder(adapter), refs, {1: Seed.clicks(0, [[24.0, 42.0]])},
                    direction="forward", stop_after_absent=None)
    assert res.method == "carry-over"
    assert res.objects[1].slices == [0, 1, 2, 3]
    # The seed slice has no mask prompt; every carried slice gets one from the slice before.
    assert adapter.mask_inputs[0] is None and len(adapter.mask_inputs) == 4
    for fed in adapter.mask_inputs[1:]:
        assert fed.shape == LOW and fed.dtype == np.float32
        assert (fed[HOLE] < 0).all()  # the hole as the decoder gave it, not filled
        assert (fed[RING] > 0).sum() == 12 * 16 - 4  # the ring itself is fed back whole
    for z in range(4):  # what is shown (and written) is hole-filled
        out = res.objects[1].outputs[z]
        assert out.mask[23:25, 41:43].all()  # the hole: low-res 15-16 x 27-28 -> slice 22.5-25
        assert (out.low_res_logits[HOLE] > 0).all()
