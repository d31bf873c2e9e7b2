"""Omniglot handwritten characters, read straight from the official zip archives.

Nothing is downloaded: the two archives of the official repository
(``images_background.zip``, 30 alphabets, and ``images_evaluation.zip``,
20 alphabets) must already be on disk.  Each 105 x 105 drawing is decoded
from the archive and resized once, in memory.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from .._typing import Int
from ._common import MAX_VALUES

#: Environment variable naming a folder that holds the archives.
DATA_ENV = "SKABC_DATA"

ARCHIVES = {"background": "images_background.zip", "evaluation": "images_evaluation.zip"}
#: Image counts of the official archives, used to recognise a truncated one.
EXPECTED_IMAGES = {"background": 19_280, "evaluation": 13_180}

_ENTRY = re.compile(r"^images_(background|evaluation)/([^/]+)/(character\d+)/(\d{4})_(\d{2})\.png$")
#: Largest drawing read: the official PNGs are under 500 bytes; a forged member may declare gigabytes (a zip bomb).
MAX_ENTRY_BYTES = 1 << 20
#: Every official drawing is a 1-bit 105 x 105 PNG.  Anything else is refused before it is decoded: a huge image
#: hides in a small file, and 16-bit or transparent pictures would decode to wrong ink without an error.
DRAWING_SIDE = 105
DRAWING_MODES = ("1", "L")


def omniglot_search_paths(data_home: str | os.PathLike | None = None) -> list[Path]:
    """Folders :func:`load_omniglot` looks in, in order.

    ``data_home`` (when given), then ``$SKABC_DATA`` (when set), then
    ``~/skabc_data``; each folder is tried as is and with an ``omniglot``
    subfolder.
    """
    roots: list[Path] = []
    if data_home is not None:
        if not isinstance(data_home, str | os.PathLike):
            raise TypeError(f"data_home must be a folder (a str or path), got {type(data_home).__name__}")
        roots.append(Path(data_home).expanduser())
    if os.environ.get(DATA_ENV):
        roots.append(Path(os.environ[DATA_ENV]).expanduser())
    roots.append(Path("~/skabc_data").expanduser())
    return [folder for root in roots for folder in (root, root / "omniglot")]


def find_omniglot_archive(subset: str = "background", data_home: str | os.PathLike | None = None) -> Path:
    """Path of the archive of ``subset``; ``FileNotFoundError`` listing where it looked."""
    _check_subset(subset)
    name = ARCHIVES[subset]
    searched = omniglot_search_paths(data_home)
    for folder in searched:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(
        f"Omniglot archive {name!r} not found; looked in: {', '.join(str(p) for p in searched)}. "
        f"Put the official {name} from https://github.com/brendenlake/omniglot (folder python/) in one of "
        f"these folders, pass data_home=, or set ${DATA_ENV}. skabc never downloads data."
    )


def load_omniglot(
    subset: str = "background",
    image_size: Int = 28,
    data_home: str | os.PathLike | None = None,
    expect_complete: bool = True,
) -> Bunch:
    """Load one Omniglot split from its official zip archive.

    Parameters
    ----------
    subset : {'background', 'evaluation'}, default='background'
        ``'background'``: 30 alphabets, 964 characters (for training);
        ``'evaluation'``: the 20 held-out alphabets, 659 characters.
    image_size : int, default=28
        Side of the returned square images (the 105 x 105 originals are
        resized with an antialiasing filter; 105 keeps them as they are).
    data_home : str or path, default=None
        Folder holding the archive; see :func:`omniglot_search_paths` for
        where else it is looked for.
    expect_complete : bool, default=True
        Require the official image count (19,280 / 13,180), so a truncated
        archive is an error; ``False`` reads a partial archive.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``images`` (n, image_size, image_size) float32 in [0, 1], ink = 1;
        ``data``, the same flattened to (n, image_size**2); ``target``, the
        character of every image (0 .. n_characters-1, the characters sorted
        by alphabet and character name, not in archive order);
        ``alphabet``, the alphabet index of every image; ``drawer``, the
        drawer number 1-20 from the file name; ``alphabet_names``;
        ``character_names`` (``'<Alphabet>/characterNN'``) indexed by target;
        ``character_ids``, the official 1-1623 id of every character; and
        ``archive``, the path read.

    Raises
    ------
    FileNotFoundError
        No archive in any searched folder (the message lists them).
    ValueError
        The file is not a readable Omniglot archive (corrupt, truncated, or
        holding other content), or a parameter is invalid.
    ImportError
        Pillow, which decodes the images, is missing.
    """
    _check_subset(subset)
    if isinstance(image_size, bool) or not isinstance(image_size, int | np.integer) or image_size < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    image_size = int(image_size)  # a numpy integer would wrap around in the size check below
    try:
        from PIL import Image
    except ImportError as exc:  # Pillow is the optional 'images' extra
        raise ImportError("load_omniglot needs Pillow to decode PNG files: pip install 'skabc[images]' (or pillow)"
                          ) from exc

    if not isinstance(expect_complete, bool | np.bool_):
        raise ValueError(f"expect_complete must be True or False, got {expect_complete!r}")
    path = find_omniglot_archive(subset, data_home)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(
            f"{path} is not a readable zip archive ({exc}); expected the official {ARCHIVES[subset]}."
        ) from exc

    with archive:
        found = [(match.groups(), info) for info in archive.infolist() if (match := _ENTRY.match(info.filename))]
        other = sorted({groups[0] for groups, _ in found} - {subset})
        if other:  # a renamed copy of the other archive would leak its alphabets into this subset
            raise ValueError(f"{path} holds images_{other[0]}/ drawings; the {subset} archive holds "
                             f"images_{subset}/ only.")
        names = [info.filename for _, info in found]
        if len(set(names)) != len(names):
            repeated = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"{path} holds {repeated} more than once: it is not an archive of Omniglot drawings.")
        big = next((info for _, info in found if info.file_size > MAX_ENTRY_BYTES), None)
        if big is not None:
            raise ValueError(f"{path}: {big.filename} unpacks to {big.file_size} bytes (a drawing takes under "
                             f"{MAX_ENTRY_BYTES}); refusing to read it.")
        entries = sorted((groups[1:], info) for groups, info in found)
        if not entries:
            raise ValueError(
                f"{path} holds no Omniglot drawings (expected entries like "
                f"images_{subset}/<Alphabet>/characterNN/<id>_<nn>.png)."
            )
        if expect_complete and len(entries) != EXPECTED_IMAGES[subset]:
            raise ValueError(
                f"{path} holds {len(entries)} drawings, the official {ARCHIVES[subset]} holds "
                f"{EXPECTED_IMAGES[subset]}: the archive is truncated or not the official one."
            )
        if len(entries) * image_size**2 > MAX_VALUES:  # numpy's MemoryError of terabytes, or gigabytes filled slowly
            raise ValueError(f"image_size={image_size} asks for {len(entries):,} drawings of {image_size} x "
                             f"{image_size} pixels, more than the {MAX_VALUES:,} values a loader returns; use a"
                             f" smaller image_size (the drawings are {DRAWING_SIDE} x {DRAWING_SIDE}).")
        images = np.empty((len(entries), image_size, image_size), dtype=np.float32)
        alphabets: dict[str, int] = {}
        characters: dict[tuple[str, str], int] = {}
        character_ids: list[int] = []
        target = np.empty(len(entries), dtype=np.int64)
        alphabet = np.empty(len(entries), dtype=np.int64)
        drawer = np.empty(len(entries), dtype=np.int64)
        for row, ((alpha, char, char_id, nn), info) in enumerate(entries):
            try:
                with Image.open(io.BytesIO(archive.read(info))) as picture:  # lazy: the header only
                    if (picture.format != "PNG" or picture.mode not in DRAWING_MODES
                            or picture.size != (DRAWING_SIDE, DRAWING_SIDE)):
                        raise _NotADrawing(f"{info.filename} is a {picture.format} image of mode {picture.mode}, "
                                           f"{picture.size[0]} x {picture.size[1]} pixels; Omniglot drawings are "
                                           f"1-bit {DRAWING_SIDE} x {DRAWING_SIDE} PNGs")
                    grey = picture.convert("L")
                    if image_size != grey.width or image_size != grey.height:
                        grey = grey.resize((image_size, image_size), Image.Resampling.LANCZOS)
                    pixels = np.asarray(grey, dtype=np.float32)
            except _NotADrawing as exc:
                raise ValueError(f"{path}: {exc}: it is not an archive of Omniglot drawings.") from None
            except Exception as exc:  # zlib / PIL errors: one clear message naming the entry
                raise ValueError(f"{path}: cannot decode {info.filename} ({exc}); the archive is corrupt.") from exc
            images[row] = 1.0 - np.clip(pixels / 255.0, 0.0, 1.0)  # strokes are dark on white
            alphabet[row] = alphabets.setdefault(alpha, len(alphabets))
            if (alpha, char) not in characters:
                characters[(alpha, char)] = len(characters)
                character_ids.append(int(char_id))
            target[row] = characters[(alpha, char)]
            drawer[row] = int(nn)

    return Bunch(
        images=images,
        data=images.reshape(len(images), -1),
        target=target,
        alphabet=alphabet,
        drawer=drawer,
        alphabet_names=np.array(list(alphabets)),
        character_names=np.array([f"{a}/{c}" for a, c in characters]),
        character_ids=np.array(character_ids),
        archive=str(path),
        DESCR=__doc__,
    )


class _NotADrawing(Exception):
    """An archive member that decodes, but not to an Omniglot drawing."""


def _check_subset(subset) -> None:
    if not isinstance(subset, str) or subset not in ARCHIVES:  # a list is unhashable: 'in' would raise TypeError
        raise ValueError(f"subset must be one of {sorted(ARCHIVES)}, got {subset!r}")


def load_omniglot_sample() -> Bunch:
    """A small bundled sample of the Omniglot evaluation set (no archive needed).

    240 drawings of 12 characters of the Tengwar alphabet (20 drawers each),
    28 x 28, taken from the official ``images_evaluation.zip`` (MIT licence,
    Lake et al. 2015) and stored in the package as 8-bit greyscale.  Handy for
    examples and tests; the full data comes from :func:`load_omniglot`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``images`` (240, 28, 28) float32 in [0, 1] with ink = 1, ``data``
        (240, 784), ``target`` (character 0-11), ``drawer`` and
        ``character_names``.
    """
    with np.load(Path(__file__).resolve().parent / "data" / "omniglot_tengwar_sample.npz") as stored:
        images = stored["images"].astype(np.float32) / 255.0
        return Bunch(
            images=images,
            data=images.reshape(len(images), -1),
            target=stored["target"].astype(np.int64),
            drawer=stored["drawer"].astype(np.int64),
            character_names=stored["character_names"],
        )
