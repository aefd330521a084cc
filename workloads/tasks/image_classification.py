"""Image classification with the pre-activation CIFAR ResNet (CIFAR-100/10, Fashion-MNIST)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from torch import nn

from workloads.config import ResNetWorkload
from workloads.data.images import DeviceImageLoader, ImageArrays, eval_batches, load_image_dataset
from workloads.models.resnet import ResNet, ResNetConfig
from workloads.parametrization import ForwardMultipliers
from workloads.tasks import Batch, Task


@lru_cache(maxsize=4)
def _cached_split(name: str, root: str | None, split: str, label_kind: str) -> ImageArrays:
    # A reused Ray worker runs many trials on the same data: decode it once per process.
    return load_image_dataset(name, root, split, label_kind)


class ImageClassificationTask(Task):
    kind = "resnet"
    item_unit = "samples"

    def __init__(self, config, device: str) -> None:
        super().__init__(config, device)
        self.wl: ResNetWorkload = config.workload
        train = _cached_split(self.wl.dataset, self.wl.data_root, "train", self.wl.label_kind)
        test = _cached_split(self.wl.dataset, self.wl.data_root, "test", self.wl.label_kind)
        self.arrays = train
        self.loader = DeviceImageLoader(train, self.wl.batch_size, device, augment=self.wl.augment, seed=config.seed)
        self.eval_set = eval_batches(test, self.wl.batch_size, device, num_batches=self.wl.eval_batches)

    def build_model(self, multipliers: ForwardMultipliers) -> nn.Module:
        cfg = ResNetConfig(
            width=self.config.width,
            depth=self.config.depth,
            base_channels=self.wl.base_channels,
            num_classes=self.arrays.num_classes,
            in_channels=self.arrays.channels,
            norm=self.wl.norm,
            residual_multiplier=multipliers.residual,
            output_multiplier=multipliers.output,
            stem_role=self.wl.stem_role,
        )
        return ResNet(cfg).to(self.device)

    def train_batch(self, step: int) -> Batch:
        return self.loader.next_batch()

    def items_per_step(self) -> int:
        return self.wl.batch_size

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        result = self.eval_set.evaluate(model)
        return {"val_loss": result.loss, "val_accuracy": result.accuracy}

    def state_dict(self) -> dict[str, Any]:
        return {"loader": self.loader.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loader.load_state_dict(state["loader"])
