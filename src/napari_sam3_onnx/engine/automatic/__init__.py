"""Automatic ("segment everything") instance segmentation on cached embeddings, and 3-D linking.

:mod:`.settings` names the knobs as SAM's automatic mask generator does; :mod:`.generate` covers
a plane with a click grid and filters the masks; :mod:`.plane` paints them into labels (tiles
merged as text search merges them); :mod:`.linking` joins per-plane labels into 3-D objects.
"""

from napari_sam3_onnx.engine.automatic.generate import AutoMask, generate_masks
from napari_sam3_onnx.engine.automatic.plane import AutoInstance, AutoResult, paint, segment_plane
from napari_sam3_onnx.engine.automatic.settings import AutoMaskSettings

__all__ = ["AutoInstance", "AutoMask", "AutoMaskSettings", "AutoResult", "generate_masks",
           "paint", "segment_plane"]
