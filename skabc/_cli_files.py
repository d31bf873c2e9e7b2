"""The files the command line reads and writes: output paths checked before any work, arrays, names, labels.

Text files are comma-separated, with the headers spreadsheet programs and pandas write; ``.npy`` files are
loaded without unpickling anything.
"""

from __future__ import annotations

from pathlib import Path


def check_picture(path: str) -> None:
    """Refuse a ``--plot`` file that matplotlib cannot write (its format is the file's extension), before any work."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise ImportError("--plot needs matplotlib: pip install 'skabc[plot]' (or pass --plot '' to skip the "
                          "picture)") from None
    check_output(path, "--plot")
    # PGF needs a LaTeX installation, which matplotlib only looks for once the picture is drawn.
    formats = {f for f in FigureCanvasBase.get_supported_filetypes() if f != "pgf"}
    if Path(path).suffix.lstrip(".").lower() not in formats:
        raise ValueError(f"--plot {path!r}: the file name must end in a picture format, one of "
                         f"{', '.join('.' + f for f in sorted(formats))}")


def check_distinct(outputs: dict, inputs: dict) -> None:
    """Refuse an output that is one of the inputs, or the other output: it would be overwritten without a word."""
    seen: dict = {}
    for what, path in [*inputs.items(), *outputs.items()]:
        if path:
            where = _identity(path)
            if where in seen and what in outputs:
                raise ValueError(f"{what} {path!r} is also the {seen[where]}: writing it would overwrite that; "
                                 "choose another file name")
            seen.setdefault(where, what)


def _identity(path) -> tuple:
    """What names one file: its device and inode where it exists (a hard link is another name of the same file,
    which ``resolve`` does not see), else its resolved path.  A name through a folder not made yet
    (``new/../X.npy``) is looked up resolved too: once the folder is made, the write lands on that file."""
    for name in (Path(path), Path(path).resolve()):
        try:
            status = name.stat()
        except OSError:
            continue
        return ("inode", status.st_dev, status.st_ino)
    return ("path", Path(path).resolve())


def check_output(path: str, what: str) -> None:
    """Refuse an output path that cannot be written, before any work is done (e.g. before training)."""
    import os

    from .persistence import names_a_folder

    out = Path(path)
    if out.is_dir() or names_a_folder(path):
        raise ValueError(f"{what} {path!r} {'is' if out.is_dir() else 'names'} a directory; give a file name inside it")
    folder = out.parent
    while not folder.exists():  # the first existing ancestor is where the missing folders would be made
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"cannot write {what} {path!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {what} {path!r}: the folder {str(folder)!r} is not writable")
    if out.exists() and not os.access(out, os.W_OK):  # a rename over it would replace it all the same
        raise ValueError(f"cannot write {what} {path!r}: the file is read-only")


#: Field values that mark a missing value, not a column name: a first line of them alone is data (it is refused by
#: name as not a number) instead of a header that would drop a row and shift every label after it.
MISSING_MARKS = frozenset({"na", "n/a", "#n/a", "nan", "null", "none", "nil", "?", "-", "missing"})


def _binary_lead(file: Path) -> str | None:
    """Why a file read as text is numpy's binary format (an .npz archive, such as scipy.sparse.save_npz writes, or
    an .npy array under another name), else ``None``: its bytes made a 'utf-8' codec error."""
    with file.open("rb") as f:
        magic = f.read(8)
    if magic.startswith((b"PK\x03\x04", b"PK\x05\x06")):  # a zip archive's first record (a header 'PK,...' is text)
        return ("it is an .npz archive (np.savez or scipy.sparse.save_npz), which the command line does not read: "
                "save one dense array with np.save as .npy, or comma-separated text")
    if magic.startswith(b"\x93NUMPY"):
        return "it is a .npy array under another name: name it .npy"
    return None


def read_array(path: str, what: str, ndim: int, header: bool | None = None, rows: int | None = None):
    """Load a .npy (never pickled objects) or comma-separated text file; a first line of no numbers is a header.

    A header whose first name is empty above a first column of distinct whole numbers is pandas' row index
    (``DataFrame.to_csv()`` writes it by default): that column is dropped.  ``header`` (2-D text files): whether
    the first line names the columns; ``None`` guesses, and warns where pandas' ``0,1,...,d-1`` stands above rows
    of whole numbers, which it reads as data.  ``rows`` (one-column files of names): the number of values
    expected, which decides whether a first name is a header (see :func:`_read_names`).

    Any name but .npy is read as text (``cluster -o labels.out`` writes text, which ``evaluate`` reads
    back), as UTF-8 with an optional byte-order mark (as spreadsheet programs write it), so a marked
    first row is still recognised as data.  One-column files (``ndim=1``: classes, groups, labels) may
    hold names: see :func:`_read_names`.
    """
    import warnings

    import numpy as np

    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{what} file {path!r} {'is a folder' if file.is_dir() else 'does not exist'}")
    skip, first_column = 0, 1  # the file's lines before the data, and its column of the first value kept
    try:
        if file.suffix.lower() == ".npy":
            with file.open("rb") as f:
                magic = f.read(64)
            if not magic:
                raise ValueError("the file is empty")
            if not magic.startswith((b"\x93NUMPY", b"PK")):  # numpy would call it pickled data
                text = magic.decode("utf-8", errors="replace").isprintable() or b"\n" in magic
                raise ValueError("it is not a .npy file (numpy's binary array format)"
                                 + ("; name a text file .csv or .txt" if text else ""))
            data = np.load(file, allow_pickle=False)
            if not isinstance(data, np.ndarray):  # an .npz archive under an .npy name
                data.close()
                raise ValueError("it is an .npz archive of several arrays, not one .npy array")
        elif (lead := _binary_lead(file)) is not None:
            raise ValueError(lead)
        elif ndim == 1:
            data = _read_names(file, rows)
        else:
            # The first two lines with content (numpy skips blank and comment lines, and counts them in skiprows).
            lead, first, second = _first_content_lines(file)
            if "," not in first and (any(mark in first for mark in (";", "\t"))
                                     or (len(first.split()) > 1 and _numeric(first.split()))):
                raise ValueError("values must be separated by commas (the first line has none, but ';', tabs or "
                                 "spaces)")
            # A header names columns: no field of it is a number (unless each marks a missing value), or it reads
            # 0, 1, ..., d - 1 (pandas' names for unnamed columns) above rows that are not all whole numbers (decided
            # once the rows are read).  A row with one bad field (a typo, 'NA') is data, and loading it fails by name
            # below instead of the row vanishing as a "header".
            fields = [v for v in first.split(",") if v.strip()]
            # pandas' row index: a first header name left empty over as many fields as every row has.  An index of
            # names is dropped as it is read; one of numbers only where they are distinct whole numbers.
            columns, row = first.split(","), second.split(",")
            index_column = _index_header(first) and len(columns) == len(row)
            named_index = index_column and not _numeric(row[:1])
            if header is None:
                names = bool(fields) and not any(_numeric([v]) for v in fields) and not all(
                    v.strip().lower() in MISSING_MARKS for v in fields)
                named = index_column or names
            else:
                named, index_column, named_index = header, index_column and header, named_index and header
            skip = lead + 1 if named else 0
            column_numbers = header is None and not named and _column_numbers(columns)
            with warnings.catch_warnings():  # an empty file is refused below, by name
                warnings.simplefilter("ignore", UserWarning)
                data = np.loadtxt(file, delimiter=",", skiprows=skip, ndmin=ndim, encoding="utf-8-sig",
                                  usecols=range(1, len(columns)) if named_index else None)
            if named_index:  # usecols reads the columns the header names and drops any field beyond them
                _check_widths(file, skip, len(columns))
            first_column = 2 if named_index else 1
            if index_column and not named_index and data.shape[1] > 1 and _row_ids(data[:, 0]):
                data, first_column = data[:, 1:], 2
            if column_numbers and len(data) > 1:
                if np.any(np.mod(data[1:], 1) != 0):  # pandas' names above its rows
                    data = data[1:]
                else:  # a first row 0, 1, ... of a table of whole numbers may be data: read as such, and said
                    _warn_header_read_as_data(path, first)
    except (OSError, ValueError, EOFError, MemoryError) as exc:  # UnicodeDecodeError is a ValueError; EOF: empty
        reason = _located(exc, file, skip) or "the file is empty"
        raise ValueError(f"cannot read {what} from {path!r}: {reason}") from None
    if data.size == 0:
        raise ValueError(f"{what} file {path!r} holds no values")
    if ndim == 1:
        data = data.reshape(-1) if data.ndim == 2 and 1 in data.shape else data
    if data.ndim != ndim:
        raise ValueError(f"{what} in {path!r} must be {ndim}-D, got shape {data.shape}")
    if ndim == 2 and data.dtype.kind == "f" and not np.isfinite(data).all():  # named here: the fit names no file
        row, column = np.argwhere(~np.isfinite(data))[0]
        if file.suffix.lower() == ".npy":
            where = f"row {row + 1}, column {column + 1}"
        else:  # the file's own line and column, past a header, comments, blank lines and a row index
            lines = _data_lines(file, skip)
            where = f"line {lines[row] if row < len(lines) else row + 1}, column {column + first_column}"
        raise ValueError(f"{what} file {path!r} holds {data[row, column]} ({where}); every value must be a finite "
                         "number")
    return data


def _located(error: Exception, file: Path, skip: int) -> str:
    """numpy's "could not convert ... at row R, column C" with the file's line instead of R (R counts the data
    rows after the header from 0, past blank and comment lines; C counts the file's columns from 1)."""
    import re

    found = re.fullmatch(r"could not convert string (.*) to float64 at row (\d+), column (\d+)\.", str(error))
    # A short or long row: numpy counts these rows from 1, and names its `usecols`, which no option sets.
    changed = re.fullmatch(r"the number of columns changed from (\d+) to (\d+) at row (\d+);.*", str(error))
    short = re.fullmatch(r"invalid column index \d+ at row (\d+) with (\d+) columns?", str(error))
    if not (found or changed or short):
        return str(error)
    try:  # numpy stopped at the value: the rest of the file may not even decode
        data = _data_lines(file, skip)
    except (OSError, ValueError):
        return str(error)
    row = int(found.group(2)) if found else int((changed or short).group(3 if changed else 1)) - 1
    where = f"line {data[row]}" if row < len(data) else f"data row {row + 1}"
    if changed:
        return (f"{where} has {_fields(changed.group(2))} where the rows before it have {changed.group(1)}; every row "
                "needs the same number")
    if short:
        return f"{where} has {_fields(short.group(2))}, fewer than the header names; every row needs one per column"
    return f"{found.group(1)} is not a number ({where}, column {found.group(3)})"


def _fields(count: str) -> str:
    return f"{count} field{'' if count == '1' else 's'}"


def _check_widths(file: Path, skip: int, width: int) -> None:
    """Refuse a data row of more fields than the header names (numpy's usecols would cut it in silence)."""
    for number, content in _data_rows(file, skip):
        if (found := len(content.split(","))) > width:
            raise ValueError(f"line {number} has {found} fields where the header has {width}; every row needs "
                             "one per column")


def _data_lines(file: Path, skip: int) -> list[int]:
    """The file's line numbers of numpy's data rows."""
    return [number for number, _ in _data_rows(file, skip)]


def _data_rows(file: Path, skip: int):
    """Numpy's data rows as (line number, content before any comment): every line but the skipped ones, empty ones
    and comments (whitespace counts)."""
    with file.open(encoding="utf-8-sig") as f:
        for number, line in enumerate(f, start=1):
            content = line.rstrip("\r\n").split("#", 1)[0]
            if number > skip and content != "":
                yield number, content


def _index_header(first_line: str) -> bool:
    """Whether a header names every column but the first: pandas' ``to_csv()`` writes the row index there, under
    an empty name (``,a,b`` or ``,0,1``), and that column is not a feature."""
    names = [v.strip() for v in first_line.split(",")]
    return (len(names) > 1 and not names[0] and all(names[1:])
            and (not any(_numeric([v]) for v in names[1:]) or names[1:] == [str(i) for i in range(len(names) - 1)]))


def _row_ids(column) -> bool:
    """Whether a column holds distinct whole numbers, as a table's row index does (a measured column rarely)."""
    import numpy as np

    return bool(np.all(np.mod(column, 1) == 0) and len(np.unique(column)) == len(column))


def _column_numbers(fields: list[str]) -> bool:
    """Whether a first line's fields read ``0,1,...,d-1`` (d >= 2), as pandas names unnamed columns."""
    return len(fields) >= 2 and [v.strip() for v in fields] == [str(i) for i in range(len(fields))]


def _first_content_lines(file: Path) -> tuple[int, str, str]:
    """The index of the first line with content (not blank, not only a ``#`` comment), that line and the next
    such line, comments cut off (empty strings past the end)."""
    found: list[tuple[int, str]] = []
    with file.open(encoding="utf-8-sig") as f:
        for number, line in enumerate(f):
            content = line.split("#", 1)[0].strip()
            if content:
                found.append((number, content))
                if len(found) == 2:
                    break
    found += [(len(found), "")] * (2 - len(found))
    return found[0][0], found[0][1], found[1][1]


def _warn_header_read_as_data(path: str, first: str) -> None:
    from ._user_warnings import warn_user
    from .exceptions import SkabcWarning

    warn_user(f"the first line of {path!r} ({first[:40]!r}) reads like pandas' names of unnamed columns, but the rows "
              "below are whole numbers too, so it was read as a row of data; pass --header if it names the columns "
              "(or --no-header to keep it as data without this warning)", SkabcWarning)


def _numeric(values: list[str]) -> bool:
    """Whether every non-blank text value reads as a number."""
    try:
        [float(v) for v in values if v.strip()]
    except ValueError:
        return False
    return True


def _read_names(file: Path, rows: int | None = None):
    """One value per line (or one comma-separated row of numbers): numbers as floats, else names as strings.

    A first line is a header when it is not a number while the rest are, or, for names, when its value occurs
    nowhere else in the file (a column title such as ``species``; a class is named more than once).  A file of
    exactly ``rows`` names (the number of values expected) keeps its first, however rare.  A missing-value mark
    (:data:`MISSING_MARKS`) among numbers is refused.
    A file of one line that is not all numbers is a header alone.  Pandas' ``Series.to_csv()`` (the row
    index, then the values, under a header whose first name is empty) gives its values.  An empty line between
    values is refused (one after the first line, or before or after the values, is skipped).
    """
    import numpy as np

    with file.open(encoding="utf-8-sig") as f:
        stripped = [line.strip() for line in f]
    content = [i for i, line in enumerate(stripped) if line]
    # Empty lines between values: dropped, each would move every later value onto the row before (probe 53j). One
    # after the first line with content may set off a header, and empty lines before or after the values are fine.
    gaps = [i for i in range(content[1], content[-1]) if not stripped[i]] if len(content) > 1 else []
    if gaps:
        raise ValueError(f"line {gaps[0] + 1} is empty: a one-column file holds one value per line, and an empty "
                         "line would shift every row after it; write the row's value there")
    lines = [line for line in stripped if line]
    line_numbers = [i + 1 for i, line in enumerate(stripped) if line]
    if len(lines) > 1 and _index_header(lines[0]) and all(line.count(",") == 1 for line in lines):
        values = [line.split(",")[1].strip() for line in lines[1:]]  # pandas' Series.to_csv(): index, value
        _refuse_missing(values, line_numbers[1:])
        return _numbers(values) if _numeric(values) else np.array(values, dtype=str)
    if len(lines) == 1:
        values = [v.strip() for v in lines[0].split(",")]
        _refuse_missing(values, line_numbers * len(values))
        return _numbers(values) if _numeric(values) else np.zeros(0)
    if any("," in line for line in lines):
        raise ValueError("a one-column file must hold one value per line")
    _refuse_missing(lines, line_numbers)
    if _numeric(lines):
        return _numbers(lines)
    if _numeric(lines[1:]):
        return _numbers(lines[1:])
    if rows is not None and len(lines) == rows:
        return np.array(lines, dtype=str)
    # A first name repeated further down is a class, not a title: a file of one row too many is refused by its
    # reader (probe 63b: the first row was dropped, and every label scored against the next row's).
    return np.array(lines[1:] if lines[0] not in lines[1:] else lines, dtype=str)


def _refuse_missing(values: list[str], line_numbers: list[int]) -> None:
    """A mark of a missing value (``'NA'``, ``'nan'``, nothing after pandas' index) among numbers, a title above
    them allowed, is a missing label, not a class named ``'NA'``: refused by its line.  Among names it is a name."""
    missing = [i for i, value in enumerate(values) if not value or value.lower() in MISSING_MARKS]
    rest = [value for value in values if value and value.lower() not in MISSING_MARKS]
    if missing and rest and (_numeric(rest) or (len(rest) > 1 and _numeric(rest[1:]))):
        raise ValueError(f"line {line_numbers[missing[0]]} holds {values[missing[0]]!r}, a missing value among "
                         "numbers: every row needs a label (-1 for a row without one)")


def _numbers(values: list[str]):
    """Numbers read as int64 where every one is an integer (ids above 2**53 stay distinct), else float64."""
    import numpy as np

    try:
        return np.array([int(v) for v in values], dtype=np.int64)
    except (ValueError, OverflowError):
        return np.array(values, dtype=np.float64)


def write_labels(labels, path: str) -> None:
    import numpy as np

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if out.suffix.lower() == ".npy":  # as read_array reads it back; a handle: np.save would append '.npy'
            with out.open("wb") as handle:
                np.save(handle, labels)
        else:
            np.savetxt(out, labels, fmt="%d")
    except OSError as error:  # a full disk says "No space left on device" without naming the file
        raise OSError(error.errno, f"cannot write the labels to {str(out)!r}: {error.strerror or error}") from None
