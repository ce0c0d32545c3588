//! Tensor data stored outside the model file (`data_location = EXTERNAL`, onnx.proto
//! `TensorProto.external_data`): where it may be read from, and the bounded read of its bytes.
//!
//! PyTorch's exporter and onnx's `save_model(..., save_as_external_data=True)` write a model's
//! weights to a file beside it (`model.onnx.data`), each tensor a range of that file named by
//! `location`, `offset` and `length`. The location comes from the file, so it is read as hostile:
//! only a relative path of plain names is accepted, and only when it resolves, symbolic links
//! followed, to a regular file inside the model's directory. Every length is checked against
//! the tensor's shape and against [`MAX_EXTERNAL_BYTES`] before a byte is read, and only that
//! range is read into a buffer sized from the shape.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use cvm_formats::quote;

use crate::error::ExternalDataError;
use crate::limits::MAX_EXTERNAL_BYTES;
use crate::proto::StringStringEntryProto;

/// Where a model's external data is read from, and how much has been read.
pub(crate) struct External {
    /// The directory holding the model file, or `None` for a model read from memory.
    directory: Option<PathBuf>,
    /// `directory` with symbolic links followed, once an external tensor needs it: a model
    /// without external data never touches its directory.
    resolved: Option<PathBuf>,
    /// The external bytes read so far for this model.
    read: u64,
    /// The most external bytes read for one model: [`MAX_EXTERNAL_BYTES`].
    limit: u64,
    /// The data file read last, kept open: PyTorch puts every tensor in one file. Only one is
    /// kept, so that a model of a file per tensor (onnx's `all_tensors_to_one_file=False`)
    /// does not run out of file descriptors.
    last: Option<DataFile>,
}

/// An opened data file, its resolved path and its size when it was opened.
struct DataFile {
    file: File,
    path: PathBuf,
    bytes: u64,
}

/// What the tensor being read needs: its layout, for the length check and messages.
pub(crate) struct Layout<'a> {
    /// Its shape.
    pub(crate) shape: &'a [u32],
    /// Its element count, at most [`MAX_TENSOR_ELEMENTS`](crate::limits::MAX_TENSOR_ELEMENTS).
    pub(crate) elements: usize,
    /// Bytes one element takes.
    pub(crate) element_size: usize,
    /// Its element type as messages name it.
    pub(crate) element_type: &'static str,
}

/// The `external_data` entries of one tensor, parsed.
struct Entries {
    location: String,
    offset: u64,
    length: Option<u64>,
}

impl External {
    /// For a model read from memory: external tensors are refused.
    pub(crate) fn in_memory() -> External {
        External {
            directory: None,
            resolved: None,
            read: 0,
            limit: MAX_EXTERNAL_BYTES,
            last: None,
        }
    }

    /// For the model file at `model`: external tensors are read from its directory.
    pub(crate) fn beside(model: &Path) -> External {
        let directory = match model.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        External {
            directory: Some(directory),
            ..External::in_memory()
        }
    }

    /// Refuses external data when the model was read from memory; checked first, so that
    /// such a model is told how to read it whatever else is wrong with the tensor.
    pub(crate) fn available(&self) -> Result<(), ExternalDataError> {
        match self.directory {
            Some(_) => Ok(()),
            None => Err(ExternalDataError::InMemory),
        }
    }

    /// The bytes of one external tensor: exactly `layout.elements × layout.element_size` of
    /// them, little-endian as in `raw_data`.
    ///
    /// Checks, in this order, each before any file is touched that it can precede: the
    /// entries (known keys, each once, numbers that are byte counts, a location), the given
    /// range (no overflow, the length the shape takes), the model's external total, the
    /// location's form (relative, plain names), then the file (inside the model's directory
    /// with symbolic links followed, a regular file, the range within it).
    pub(crate) fn read(
        &mut self,
        entries: &[StringStringEntryProto],
        layout: &Layout<'_>,
    ) -> Result<Vec<u8>, ExternalDataError> {
        self.available()?;
        let entries = parse(entries)?;
        // At most 2^29 (2^26 elements of 8 bytes): the buffer is sized from the checked shape,
        // never from the file.
        let buffer_len =
            layout
                .elements
                .checked_mul(layout.element_size)
                .ok_or(ExternalDataError::TooMuch {
                    bytes: u64::MAX,
                    read: self.read,
                    limit: self.limit,
                })?;
        let expected = buffer_len as u64;
        let mismatch = |length: u64, to_end: bool| ExternalDataError::LengthMismatch {
            length,
            to_end,
            shape: layout.shape.to_vec(),
            elements: layout.elements,
            element_type: layout.element_type,
            expected,
        };
        if let Some(length) = entries.length {
            if entries.offset.checked_add(length).is_none() {
                return Err(ExternalDataError::Overflow {
                    offset: entries.offset,
                    length,
                });
            }
            if length != expected {
                return Err(mismatch(length, false));
            }
        }
        let total = self
            .read
            .checked_add(expected)
            .filter(|&total| total <= self.limit);
        let Some(total) = total else {
            return Err(ExternalDataError::TooMuch {
                bytes: expected,
                read: self.read,
                limit: self.limit,
            });
        };
        check_form(&entries.location)?;
        let location = quote(&entries.location);
        let data = self.open(&entries.location, &location)?;
        if entries.offset > data.bytes {
            return Err(ExternalDataError::OffsetPastEnd {
                location,
                offset: entries.offset,
                file_bytes: data.bytes,
            });
        }
        match entries.length {
            Some(length) if entries.offset.saturating_add(length) > data.bytes => {
                return Err(ExternalDataError::LengthPastEnd {
                    location,
                    offset: entries.offset,
                    length,
                    file_bytes: data.bytes,
                });
            }
            Some(_) => {}
            None => {
                let to_end = data.bytes - entries.offset;
                if to_end != expected {
                    return Err(mismatch(to_end, true));
                }
            }
        }
        let io = |source| ExternalDataError::Io {
            location: location.clone(),
            path: data.path.clone(),
            source,
        };
        let mut bytes = vec![0u8; buffer_len];
        data.file
            .seek(SeekFrom::Start(entries.offset))
            .map_err(io)?;
        data.file.read_exact(&mut bytes).map_err(io)?;
        self.read = total;
        Ok(bytes)
    }

    /// The data file at `relative` (a checked location) in the model's directory, opened unless
    /// it was the last one read.
    fn open(&mut self, relative: &str, location: &str) -> Result<&mut DataFile, ExternalDataError> {
        let directory = self.resolved_directory()?;
        let joined = directory.join(relative);
        let io = |path: &Path, source| ExternalDataError::Io {
            location: location.to_string(),
            path: path.to_path_buf(),
            source,
        };
        let target = std::fs::canonicalize(&joined).map_err(|source| io(&joined, source))?;
        if !target.starts_with(&directory) {
            return Err(ExternalDataError::Outside {
                location: location.to_string(),
                target,
                directory,
            });
        }
        let data = match self.last.take() {
            Some(last) if last.path == target => last,
            _ => {
                // The type is checked before opening: opening a FIFO would wait for a writer.
                let metadata = std::fs::metadata(&target).map_err(|source| io(&target, source))?;
                not_a_file(&metadata, location)?;
                let file = File::open(&target).map_err(|source| io(&target, source))?;
                // And again on the opened file, which may have been replaced in between.
                let metadata = file.metadata().map_err(|source| io(&target, source))?;
                not_a_file(&metadata, location)?;
                DataFile {
                    file,
                    path: target,
                    bytes: metadata.len(),
                }
            }
        };
        Ok(self.last.insert(data))
    }

    /// The model's directory with symbolic links followed, resolved once.
    fn resolved_directory(&mut self) -> Result<PathBuf, ExternalDataError> {
        if let Some(resolved) = &self.resolved {
            return Ok(resolved.clone());
        }
        let directory = self.directory.clone().unwrap_or_else(|| PathBuf::from("."));
        let resolved = std::fs::canonicalize(&directory)
            .map_err(|source| ExternalDataError::Directory { directory, source })?;
        self.resolved = Some(resolved.clone());
        Ok(resolved)
    }
}

/// Refuses what is not a regular file.
fn not_a_file(metadata: &std::fs::Metadata, location: &str) -> Result<(), ExternalDataError> {
    if metadata.is_file() {
        return Ok(());
    }
    Err(ExternalDataError::NotAFile {
        location: location.to_string(),
        kind: if metadata.is_dir() {
            "a directory"
        } else {
            "a device, FIFO or socket"
        },
    })
}

/// Parses the entries: `location` (required), `offset` (default 0), `length` (default: to the
/// end of the file), `checksum` (not checked), each at most once; no other key.
fn parse(entries: &[StringStringEntryProto]) -> Result<Entries, ExternalDataError> {
    let mut location = None;
    let mut offset = None;
    let mut length = None;
    let mut checksum = false;
    for entry in entries {
        let key = entry.key.as_deref().unwrap_or_default();
        let value = entry.value.as_deref().unwrap_or_default();
        let repeated = |key| Err(ExternalDataError::RepeatedKey { key });
        match key {
            "location" if location.is_some() => return repeated("location"),
            "location" => location = Some(value.to_string()),
            "offset" if offset.is_some() => return repeated("offset"),
            "offset" => offset = Some(byte_count("offset", value)?),
            "length" if length.is_some() => return repeated("length"),
            "length" => length = Some(byte_count("length", value)?),
            "checksum" if checksum => return repeated("checksum"),
            // A SHA-1 of the data, which onnx itself writes but never checks.
            "checksum" => checksum = true,
            other => {
                return Err(ExternalDataError::UnknownKey { key: quote(other) });
            }
        }
    }
    Ok(Entries {
        location: location.ok_or(ExternalDataError::MissingLocation)?,
        offset: offset.unwrap_or(0),
        length,
    })
}

/// A decimal byte count: digits only (no sign, space or exponent), within `u64`.
fn byte_count(key: &'static str, value: &str) -> Result<u64, ExternalDataError> {
    let bad = || ExternalDataError::BadNumber {
        key,
        value: quote(value),
    };
    if value.is_empty() || !value.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(bad());
    }
    value.parse().map_err(|_| bad())
}

/// Refuses a location that is empty, absolute, or has a component other than a plain name,
/// before it is joined to the model's directory: `..` or a root would leave it.
fn check_form(location: &str) -> Result<(), ExternalDataError> {
    if location.is_empty() {
        return Err(ExternalDataError::EmptyLocation);
    }
    let path = Path::new(location);
    if path.is_absolute() || location.starts_with('/') {
        return Err(ExternalDataError::AbsoluteLocation {
            location: quote(location),
        });
    }
    let component_error = |component: &str| ExternalDataError::LocationComponent {
        location: quote(location),
        component: quote(component),
    };
    // onnx writes POSIX paths; `Path::components` would drop an inner `.` and an empty
    // segment silently, so the segments are checked as written first.
    if let Some(segment) = location
        .split('/')
        .find(|segment| matches!(*segment, "" | "." | ".."))
    {
        return Err(component_error(segment));
    }
    // And as this system splits them (a Windows drive prefix or `\..`).
    if let Some(component) = path
        .components()
        .find(|component| !matches!(component, Component::Normal(_)))
    {
        return Err(component_error(&component.as_os_str().to_string_lossy()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn entry(key: &str, value: &str) -> StringStringEntryProto {
        StringStringEntryProto {
            key: Some(key.into()),
            value: Some(value.into()),
        }
    }

    #[test]
    fn entries_are_parsed_strictly() {
        let parsed = parse(&[entry("location", "w.bin"), entry("checksum", "ab")]).unwrap();
        assert_eq!((parsed.offset, parsed.length), (0, None));
        let parsed = parse(&[
            entry("offset", "0016"),
            entry("length", "18446744073709551615"),
            entry("location", "w.bin"),
        ])
        .unwrap();
        assert_eq!((parsed.offset, parsed.length), (16, Some(u64::MAX)));
        let message =
            |entries: &[StringStringEntryProto]| parse(entries).err().unwrap().to_string();
        assert_eq!(
            message(&[entry("location", "a"), entry("basepath", "/")]),
            "its external_data has the key \"basepath\", which is not one of location, offset, \
             length and checksum"
        );
        assert_eq!(
            message(&[entry("location", "a"), entry("location", "b")]),
            "its external_data gives location twice"
        );
        for bad in ["", "-1", "+1", " 1", "1e3", "0x10", "18446744073709551616"] {
            assert_eq!(
                message(&[entry("location", "a"), entry("offset", bad)]),
                format!(
                    "its external_data offset {} is not a byte count (decimal digits, at most \
                     18446744073709551615)",
                    quote(bad)
                )
            );
        }
        assert_eq!(
            message(&[entry("offset", "1")]),
            "its external_data has no location, the file that holds its data"
        );
    }

    #[test]
    fn locations_are_relative_plain_names() {
        for good in [
            "w.bin",
            "weights/w.bin",
            "model.onnx.data",
            "a..b",
            ".hidden",
        ] {
            assert!(check_form(good).is_ok(), "{good}");
        }
        let message = |location: &str| check_form(location).err().unwrap().to_string();
        assert_eq!(message(""), "its external data location is empty");
        assert!(message("/etc/passwd").contains("is an absolute path"));
        for (location, component) in [
            ("../w.bin", ".."),
            ("a/../../w.bin", ".."),
            ("./w.bin", "."),
            ("a/./w.bin", "."),
            ("a//w.bin", ""),
            ("a/", ""),
        ] {
            assert!(
                message(location).contains(&format!("has the component {}", quote(component))),
                "{location}: {}",
                message(location)
            );
        }
    }

    /// The model's total is bounded across tensors: a small limit stands for
    /// [`MAX_EXTERNAL_BYTES`], whose test would read 2 GiB.
    #[test]
    fn the_total_is_bounded_before_reading() {
        let dir =
            std::env::temp_dir().join(format!("cvm-onnx-external-total-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("w.bin"), [7u8; 16]).unwrap();
        let mut external = External {
            limit: 12,
            ..External::beside(&dir.join("model.onnx"))
        };
        let layout = Layout {
            shape: &[8],
            elements: 8,
            element_size: 1,
            element_type: "uint8",
        };
        let entries = [entry("location", "w.bin"), entry("length", "8")];
        assert_eq!(external.read(&entries, &layout).unwrap(), vec![7u8; 8]);
        let error = external.read(&entries, &layout).err().unwrap();
        assert_eq!(
            error.to_string(),
            "its 8 bytes of external data would bring the model's to more than 12 bytes (read \
             so far: 8), the most this reader reads for one model"
        );
        // Nothing is opened for a tensor over the limit: a missing file is not reached.
        let missing = [entry("location", "missing.bin"), entry("length", "8")];
        assert!(matches!(
            external.read(&missing, &layout),
            Err(ExternalDataError::TooMuch { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
