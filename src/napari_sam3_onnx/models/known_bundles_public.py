"""Registry entries for the public SAM 3-family exports of the December 2026 survey.

Facts come from the publishers' model cards (docs/models.md lists them). No card gives a commit
to pin, so every entry uses ``main`` and says so; only the PIXL cards give byte sizes (used,
exact) and SHA-256 digests, and those are printed shortened on the cards, so they are **not**
used as digests: the download records the first copy's hashes (trust on first use) and the
folder's structure is checked when it is opened. Where a card names a file but not its path
in the repository, the path is the one the card's own tool uses and the notes say so.

``public-mission`` assembles one folder from three repositories: parodiniccolo's dual encoder,
danilobukvic's text encoder and concept decoder, and the jax-image-tools mask decoder and memory
graphs, so that clicks, boxes, text and propagation run on one encode per plane
(:mod:`.adapters.hf_sam3`).
"""

from __future__ import annotations

from .bundle_spec import HF, SAM_LICENSE, SAM_LICENSE_URL, BundleSpec, FileSpec

MAIN = "main"
UNPINNED = "No revision is pinned in any source found, so 'main' is used: the files may change."
NO_HASH = ("No SHA-256 is published in full; the first download's hashes are recorded beside "
           "the files and later copies are checked against them.")


def _url(repo: str, path: str, revision: str = MAIN) -> str:
    return f"{HF}/{repo}/resolve/{revision}/{path}"


def _files(repo: str, *names: str, prefix: str = "", revision: str = MAIN,
           sizes: dict[str, int] | None = None) -> tuple[FileSpec, ...]:
    return tuple(FileSpec(n, _url(repo, prefix + n, revision), None, (sizes or {}).get(n))
                 for n in names)


WWWW = "wW-Ww/sam3-ONNX"
DANI = "danilobukvic/sam3-text-onnx"
PARO = "parodiniccolo/sam3-dual-webgpu"
RUSEN = "rusen/sam3-browser-int8"
PIXL = "xuckless/pixl-sam3-onnx"
PIXL_E = "xuckless/pixl-efficientsam3-onnx"
GETI = "rajeshgangireddy/EfficientSAM3_OpenVINO"
JAX = "jax-image-tools/sam3-video-onnx"

_DANI_FILES = _files(DANI, "text_encoder_int4.onnx", "decoder_int4.onnx", prefix="onnx/")
_MISSION = (
    *_files(PARO, "sam3_vision_dual_q4f16.onnx", "sam3_vision_dual_q4f16.onnx.data"),
    *_DANI_FILES,
    *_files(JAX, "mask_decoder.onnx", "memory_attention.onnx", "memory_encoder.onnx",
            "constants.json"),
)


def _spec(id_: str, title: str, layout: str, files: tuple[FileSpec, ...], repo: str,
          caps: set[str], precision: str, notes: str,
          other_sources: tuple[str, ...] = ()) -> BundleSpec:
    return BundleSpec(
        id=id_, title=title, layout=layout, files=files, source_repo=repo, revision=MAIN,
        licence_name=SAM_LICENSE, licence_url=SAM_LICENSE_URL,
        capabilities=frozenset({"encode", *caps}), precision=precision,
        notes=f"{notes} {UNPINNED}", other_sources=other_sources)


def public_bundles(vocabulary: FileSpec) -> tuple[BundleSpec, ...]:
    """The entries; ``vocabulary`` (CLIP's BPE merges) is added to every text bundle's files."""
    return tuple(
        spec if not spec.files or "text" not in spec.capabilities else BundleSpec(
            **{**vars(spec), "files": (*spec.files, vocabulary)})
        for spec in _PUBLIC)


_PUBLIC: tuple[BundleSpec, ...] = (
    _spec("wwww-directml", "SAM 3 text, clicks and boxes on one encode (wW-Ww, fp16 vision)",
          "hf-sam3",
          _files(WWWW, "vision_fp16.onnx", "text_fp16.onnx", "detector.onnx",
                 "prompt_encoder_mask_decoder.onnx"),
          WWWW, {"clicks", "boxes", "text"}, "mixed",
          "One vision pass feeds the detector (features_288/144/72) and the tracker "
          "(image_embeddings.*); card: vision 0.4 s, detector 0.2 s on an RTX 3070. The card "
          "does not say whether the graphs keep external-data files beside them; if the "
          f"download names one missing, fetch it by hand. {NO_HASH}"),
    _spec("danilobukvic-text", "SAM 3 text search (danilobukvic, Hugging Face Sam3Model, int4)",
          "hf-sam3",
          (*_files(DANI, "vision_encoder_int4.onnx", prefix="onnx/"), *_DANI_FILES),
          DANI, {"text"}, "mixed",
          "transformers.js export (fp32 3.35 GB, int8 880 MB, int4 686 MB per the card; fp16 "
          "is broken there). The card names the *_int4.onnx files; the onnx/ folder is the "
          "transformers.js convention, not confirmed. No presence output was found: scores "
          f"are sigmoid(logit). {NO_HASH}"),
    _spec("public-mission", "SAM 3 clicks, text and propagation on one encode (public graphs)",
          "hf-sam3", _MISSION, PARO, {"clicks", "boxes", "text", "memory"}, "mixed",
          "Assembled from three repositories: parodiniccolo's dual encoder (q4f16, 311 MB per "
          "its card; the '.onnx.data' name is read from the card's '+ .data'), danilobukvic's "
          "int4 text encoder and decoder (paths as in danilobukvic-text), and the "
          "jax-image-tools mask decoder (object pointers), memory graphs and constants.json "
          "(about 55 MB per its card). The tracker-neck tensors are checked against each other "
          f"when the folder is opened. {NO_HASH}", other_sources=(DANI, JAX)),
    _spec("rusen-int8", "SAM 3 text and box search (rusen, wkentaro v0.2.0 in int8)",
          "wkentaro-v0.2",
          _files(RUSEN, "sam3_image_encoder.onnx", "sam3_language_encoder.onnx",
                 "sam3_decoder.onnx"),
          RUSEN, {"text", "exemplars"}, "int8",
          "quantize_dynamic QUInt8: encoder 466 MB, language encoder 387 MB, decoder 35 MB "
          "(card; fp32 about 3.5 GB). The file names are wkentaro's v0.2.0 ones, which the "
          "card's decoder input list follows; scores are cut at 0.5 inside the decoder. "
          f"{NO_HASH}"),
    _spec("pixl-sam3", "SAM 3 text and exemplar search (PIXL, fp16 weights)", "pixl-sam3",
          _files(PIXL, "sam3_image_encoder_fp16.onnx", "sam3_text_encoder_fp16.onnx",
                 "sam3_decoder.onnx",
                 sizes={"sam3_image_encoder_fp16.onnx": 908_717_454,
                        "sam3_text_encoder_fp16.onnx": 706_988_044,
                        "sam3_decoder.onnx": 129_868_227}),
          PIXL, {"text", "exemplars"}, "fp16",
          "Exact byte sizes from the card. The card prints SHA-256 digests shortened "
          f"(709e68c5..., 2145c1a5..., f6749e7b...), so they cannot pin the files. {NO_HASH} "
          "8 exemplar slots; the decoder's input names are not published and are found from "
          "their shapes."),
    _spec("pixl-efficientsam3", "EfficientSAM3 EV-M text and exemplar search (PIXL)",
          "pixl-sam3",
          _files(PIXL_E, "efficientsam3_ev_m_image_encoder.onnx",
                 "efficientsam3_ev_m_text_encoder.onnx", "efficientsam3_ev_m_decoder.onnx",
                 sizes={"efficientsam3_ev_m_image_encoder.onnx": 85_436_582,
                        "efficientsam3_ev_m_text_encoder.onnx": 169_171_689,
                        "efficientsam3_ev_m_decoder.onnx": 129_858_624}),
          PIXL_E, {"text", "exemplars"}, "mixed",
          "EfficientViT image encoder and MobileCLIP-S0 text encoder (16 tokens, padded to the "
          "decoder's 32) with SAM 3's decoder. Exact sizes from the card; SHA-256 printed "
          f"shortened (2ed08306..., 3065ea61..., 16accc22...). {NO_HASH} The weights' licence "
          "is stated two ways (SAM License on the card, Apache-2.0 on the repository); the "
          "stricter one is recorded. No tracker: clicks and propagation need other graphs."),
    _spec("geti-efficientsam3", "EfficientSAM3 text search (Intel Geti, onnx/ folder)",
          "hf-sam3", (), GETI, {"text", "exemplars", "boxes"}, "mixed",
          "The onnx/ folder holds vision-encoder, text-encoder, geometry-encoder(-exemplar) "
          "and prompt-decoder graphs per student (EfficientViT-B1, RepViT-M1.1); the exact "
          "file paths could not be read, so download the folder by hand (hf download "
          f"{GETI} --include 'onnx/*'). Its presence_logits is a constant in the graph and "
          "is not used. Exemplar boxes go through the geometry encoder (its -exemplar variant when "
          "both are there). Card: 634 ms int8 on a desktop CPU."),
)
