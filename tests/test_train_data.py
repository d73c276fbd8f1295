"""training/train.py's data: the synthetic MNIST-shaped set and the real-MNIST IDX reader."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "training"))

from train import read_idx_mnist, synthetic_mnist


def write_idx(directory: Path, images: torch.Tensor, labels: torch.Tensor) -> None:
    """Write images (N, 28, 28 uint8) and labels in MNIST's IDX format."""
    count = len(labels)
    (directory / "train-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 2051, count, 28, 28) + images.numpy().tobytes())
    (directory / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, count) + labels.numpy().tobytes())


class TestData:
    def test_synthetic_shape_and_labels(self) -> None:
        """The synthetic set is MNIST-shaped, normalised, with all ten classes."""
        images, labels = synthetic_mnist(512, seed=0)
        assert images.shape == (512, 1, 28, 28) and labels.shape == (512,)
        assert set(labels.tolist()) == set(range(10))

    def test_idx_round_trip(self, tmp_path: Path) -> None:
        """IDX files are read back pixel for pixel (then normalised) with their labels."""
        raw = torch.randint(0, 256, (5, 28, 28), dtype=torch.uint8)
        labels = torch.tensor([3, 1, 4, 1, 5], dtype=torch.uint8)
        write_idx(tmp_path, raw, labels)
        images, read_labels = read_idx_mnist(tmp_path)
        assert read_labels.tolist() == [3, 1, 4, 1, 5]
        assert torch.allclose(images[:, 0] * 0.3081 + 0.1307, raw.float() / 255, atol=1e-6)

    def test_missing_or_wrong_files(self, tmp_path: Path) -> None:
        """A missing file or a wrong magic number is refused with a sentence saying which."""
        with pytest.raises(FileNotFoundError, match="needs the uncompressed MNIST IDX files"):
            read_idx_mnist(tmp_path)
        write_idx(tmp_path, torch.zeros(1, 28, 28, dtype=torch.uint8), torch.zeros(1, dtype=torch.uint8))
        (tmp_path / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 7, 1) + b"\0")
        with pytest.raises(ValueError, match="bad magic numbers"):
            read_idx_mnist(tmp_path)
