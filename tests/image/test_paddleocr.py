"""PaddleOCR: attached to the toolkit entry in matrix.yaml, not to a stage.

PaddleOCR's own models (PP-OCRv5 detection and recognition, the document-orientation
classifier PP-LCNet_x1_0_doc_ori, the UVDoc unwarping model, the text-line orientation
classifier PP-LCNet_x1_0_textline_ori) are downloads from Hugging Face, AI Studio, BOS or
ModelScope, and so is the font (simfang.ttf) that drawing results with `save_to_img`
needs unless PADDLE_PDX_LOCAL_FONT_FILE_PATH names a local one. None of that is
reachable here, so the suite serves PaddleOCR models it makes itself, in a container
without a network: everything else of the pipeline runs for real.

- A text detector: a 1x1 convolution that maps dark pixels to 1, a horizontal max-pool
  that joins a word's strokes, a sigmoid: the probability map a DB detector outputs.
- A recogniser: per image column, '#' where the column has ink and CTC blank elsewhere.
Both are Paddle layers in dynamic mode, saved with `paddle.jit.save` beside an
`inference.yml` in the format of PaddleX's own models (model name, pre-processing,
DB / CTC post-processing, character dictionary). On an image with a word of three bars
above a word of two, `PaddleOCR(...).predict` (read, resize, normalise, Paddle Inference,
DB post-processing with unclip, crop, recognition, CTC decoding, ordering) must find two
boxes around them, top to bottom, and read "###" and "##".
"""

from __future__ import annotations

import json

import docker

SCRIPT = r'''
import json, os, sys, tempfile
import cv2
import numpy as np
import paddle
from paddle.static import InputSpec

class InkDetector(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.ink = paddle.nn.Conv2D(3, 1, 1)
        self.ink.weight.set_value(paddle.full([1, 3, 1, 1], -1.0 / 3))
        self.ink.bias.set_value(paddle.zeros([1]))
        self.join = paddle.nn.MaxPool2D(kernel_size=[1, 31], stride=1, padding=[0, 15])
    def forward(self, x):
        return paddle.nn.functional.sigmoid(4.0 * self.join(self.ink(x)))

class BarReader(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.ink = paddle.nn.Conv2D(3, 1, 1)
        self.ink.weight.set_value(paddle.full([1, 3, 1, 1], -1.0 / 3))
        self.ink.bias.set_value(paddle.zeros([1]))
        self.head = paddle.nn.Linear(1, 3)  # classes: blank, '#', ' '
        self.head.weight.set_value(paddle.to_tensor([[0.0, 10.0, 0.0]]))
        self.head.bias.set_value(paddle.to_tensor([0.0, -5.0, -10.0]))
    def forward(self, x):
        ink = self.ink(x).max(axis=2)
        return paddle.nn.functional.softmax(self.head(ink.transpose([0, 2, 1])), axis=-1)

def save(net, spec, path, config):
    os.makedirs(path)
    net.eval()
    paddle.jit.save(net, os.path.join(path, "inference"), input_spec=[spec])
    with open(os.path.join(path, "inference.yml"), "w") as f:
        json.dump(config, f)  # JSON is YAML

work = tempfile.mkdtemp()
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
save(InkDetector(), InputSpec([None, 3, None, None], "float32", "x"), f"{work}/det", {
    "Global": {"model_name": "PP-OCRv5_mobile_det"},
    "PreProcess": {"transform_ops": [
        {"DecodeImage": {"channel_first": False, "img_mode": "BGR"}},
        {"DetLabelEncode": None},
        {"DetResizeForTest": {"resize_long": 960}},
        {"NormalizeImage": {"mean": mean, "std": std, "scale": 1 / 255, "order": "hwc"}},
        {"ToCHWImage": None},
        {"KeepKeys": {"keep_keys": ["image", "shape", "polys", "ignore_tags"]}}]},
    "PostProcess": {"name": "DBPostProcess", "thresh": 0.3, "box_thresh": 0.6,
                    "max_candidates": 1000, "unclip_ratio": 1.5}})
save(BarReader(), InputSpec([None, 3, 48, None], "float32", "x"), f"{work}/rec", {
    "Global": {"model_name": "PP-OCRv5_mobile_rec"},
    "PreProcess": {"transform_ops": [
        {"DecodeImage": {"channel_first": False, "img_mode": "BGR"}},
        {"MultiLabelEncode": {"gtc_encode": "NRTRLabelEncode"}},
        {"RecResizeImg": {"image_shape": [3, 48, 320]}},
        {"KeepKeys": {"keep_keys": ["image", "label_ctc", "label_gtc", "length", "valid_ratio"]}}]},
    "PostProcess": {"name": "CTCLabelDecode", "character_dict": ["#"]}})

img = np.full((300, 400, 3), 255, np.uint8)
words = []
for top, bars in ((60, 3), (180, 2)):
    for i in range(bars):
        img[top:top + 40, 100 + 48 * i:124 + 48 * i] = 0
    words.append([100, top, 124 + 48 * (bars - 1), top + 40])
cv2.imwrite(f"{work}/words.png", img)

from paddleocr import PaddleOCR
ocr = PaddleOCR(text_detection_model_name="PP-OCRv5_mobile_det", text_detection_model_dir=f"{work}/det",
                text_recognition_model_name="PP-OCRv5_mobile_rec", text_recognition_model_dir=f"{work}/rec",
                use_doc_orientation_classify=False, use_doc_unwarping=False,
                use_textline_orientation=False, device="cpu")
res = ocr.predict(f"{work}/words.png")[0]
print(json.dumps({"texts": list(res["rec_texts"]), "scores": [float(s) for s in res["rec_scores"]],
                  "boxes": [np.asarray(p).tolist() for p in res["rec_polys"]], "words": words}))
'''


def test_pipeline_reads_with_models_it_made(spec, run_labels):
    client = docker.from_env()
    # From a file: paddle.jit.save translates `forward` from its source (`python -c` has none).
    out = client.containers.run(
        spec["image_id"], ["bash", "-c", 'printf "%s" "$SCRIPT" > /tmp/ocr.py && python /tmp/ocr.py'],
        remove=True, network_mode="none", environment={"STAGECRAFT_QUIET": "1", "SCRIPT": SCRIPT},
        labels=run_labels,
        stderr=False)
    got = json.loads(out.decode().strip().splitlines()[-1])
    assert got["texts"] == ["###", "##"], f"{spec['tag']}: read {got}"
    assert all(s > 0.9 for s in got["scores"]), f"{spec['tag']}: scores {got['scores']}"
    for box, (x0, y0, x1, y1) in zip(got["boxes"], got["words"], strict=True):
        xs, ys = [p[0] for p in box], [p[1] for p in box]
        # The box holds the word (DB's unclip widens it) and no more than a word's margin.
        assert min(xs) <= x0 and max(xs) >= x1 and min(ys) <= y0 and max(ys) >= y1, (
            f"{spec['tag']}: box {box} misses word {(x0, y0, x1, y1)}")
        assert min(xs) >= x0 - 60 and max(xs) <= x1 + 60 and min(ys) >= y0 - 40 and max(ys) <= y1 + 40, (
            f"{spec['tag']}: box {box} far wider than word {(x0, y0, x1, y1)}")
