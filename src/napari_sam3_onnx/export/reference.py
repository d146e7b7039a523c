"""The PyTorch reference paths the parity checks compare the exported bundle against.

All run Meta's own entry points on the same model object the bundle was exported from:

* clicks and boxes: ``Sam3Processor.set_image`` then ``Sam3Image.predict_inst`` (SAM 3's
  interactive image predictor: ``no_mem_embed`` added, hole filling 256 px, logits > 0);
* text and exemplar boxes: ``Sam3Processor.set_text_prompt`` / ``add_geometric_prompt`` (kept
  detections at 0.5) and ``Sam3Image.forward_grounding`` (the raw heads);
* propagation: ``Sam3TrackerPredictor`` (``init_state`` on cached features,
  ``add_new_points_or_box``, ``propagate_in_video`` forward then in reverse, one shared state).

Everything runs in fp32 on the CPU (:mod:`.torch_env`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .torch_env import cpu_host, fp32_memory_storage


class Reference:
    """Meta's processor / predictors around one built model."""

    def __init__(self, model: torch.nn.Module) -> None:
        from sam3.model.sam3_image_processor import Sam3Processor

        self.model = model
        self.processor = Sam3Processor(model, resolution=1008, device="cpu",
                                       confidence_threshold=0.5)
        self.tracker = model.inst_interactive_predictor.model

    @torch.inference_mode()
    def set_image(self, rgb: np.ndarray) -> dict:
        """``Sam3Processor.set_image`` state (backbone outputs, tracker features prepared)."""
        with cpu_host():
            return self.processor.set_image(torch.from_numpy(rgb).permute(2, 0, 1))

    # ---- clicks and boxes ---------------------------------------------------------------
    @torch.inference_mode()
    def predict_inst(self, state: dict, points_xy: np.ndarray | None, labels: np.ndarray | None,
                     box_xyxy: np.ndarray | None = None, mask_input: np.ndarray | None = None
                     ) -> dict:
        """One ``predict_inst`` call with SAM 3's multimask rule (<= 1 point: 3 masks).

        Returns the chosen candidate: ``mask_logits`` at image size (after upstream's hole
        filling), ``low_res`` (288 x 288, clamped +-32, before filling), ``iou`` and ``index``.
        """
        n = (0 if labels is None else len(labels)) + (2 if box_xyxy is not None else 0)
        multi = n <= 1

        def call(multimask: bool):
            with cpu_host():
                return self.model.predict_inst(
                    state, point_coords=points_xy, point_labels=labels, box=box_xyxy,
                    mask_input=mask_input, multimask_output=multimask, return_logits=True,
                    normalize_coords=True)

        masks, ious, low = call(multi)
        if multi:
            k = int(np.argmax(ious))
            index = k + 1
        else:  # which token did the stability rule return? 0, or the best multimask one
            k = 0
            _, m_ious, m_low = call(True)
            best = int(np.argmax(m_ious))
            same = np.array_equal(low[0], m_low[best]) and ious[0] == m_ious[best]
            index = best + 1 if same else 0
        return {"mask_logits": masks[k], "low_res": low[k], "iou": float(ious[k]),
                "index": index, "ious": ious}

    # ---- concepts -----------------------------------------------------------------------
    @torch.inference_mode()
    def concept(self, state: dict, text: str | None,
                boxes_cxcywh: Sequence[Sequence[float]] = (),
                labels: Sequence[bool] = ()) -> dict:
        """Text and/or exemplar boxes through ``Sam3Processor`` (boxes one by one, as upstream).

        Returns the kept detections (``scores``, ``boxes`` xyxy pixels, ``masks`` bool) and the
        raw heads of the last call (``pred_logits``, ``pred_boxes``, ``pred_masks``,
        ``presence``).
        """
        proc = self.processor
        proc.reset_all_prompts(state)
        with cpu_host():
            if text is not None:
                state = proc.set_text_prompt(text, state)
            for box, lab in zip(boxes_cxcywh, labels, strict=True):
                state = proc.add_geometric_prompt(list(box), bool(lab), state)
            raw = self.model.forward_grounding(
                backbone_out=state["backbone_out"], find_input=proc.find_stage,
                find_target=None, geometric_prompt=state["geometric_prompt"])
        return {
            "scores": state["scores"].numpy(), "boxes": state["boxes"].numpy(),
            "masks": state["masks"][:, 0].numpy(),
            "pred_logits": raw["pred_logits"][0, :, 0].numpy(),
            "pred_boxes": raw["pred_boxes"][0].numpy(),
            "pred_masks": raw["pred_masks"][0].numpy(),
            "presence": float(raw["presence_logit_dec"].reshape(-1)[0]),
        }

    # ---- propagation --------------------------------------------------------------------
    @torch.inference_mode()
    def propagate(self, frames: Sequence[np.ndarray], seed_index: int,
                  points_xy: np.ndarray, labels: np.ndarray) -> dict[int, np.ndarray]:
        """Track one clicked object through ``frames``: forward, then reverse, one state.

        Returns ``{frame: (288, 288) low-res logits}`` (the prompted frame's too).
        """
        tracker = self.tracker
        cached = {}
        for i, rgb in enumerate(frames):
            st = self.set_image(rgb)
            image = torch.zeros(1, 3, 1, 1)  # only expanded, never read, by the tracker
            cached[i] = (image, st["backbone_out"]["sam2_backbone_out"])
        h, w = frames[0].shape[:2]
        out: dict[int, np.ndarray] = {}
        with cpu_host(), fp32_memory_storage():
            state = tracker.init_state(video_height=h, video_width=w, num_frames=len(frames),
                                       cached_features=cached, offload_state_to_cpu=True)
            tracker.add_new_points_or_box(
                state, frame_idx=seed_index, obj_id=1,
                points=torch.as_tensor(points_xy, dtype=torch.float32),
                labels=torch.as_tensor(labels, dtype=torch.int32), rel_coordinates=False)
            for reverse in (False, True):
                for idx, _ids, low_res, _video, _scores in tracker.propagate_in_video(
                        state, start_frame_idx=seed_index, max_frame_num_to_track=None,
                        reverse=reverse, tqdm_disable=True, propagate_preflight=not reverse):
                    out[int(idx)] = low_res[0, 0].float().numpy()
        return out
