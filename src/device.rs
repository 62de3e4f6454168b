//! Device types and devices, numbered as c10's `DeviceType`.

use crate::error::Result;
use std::fmt;

/// A kind of device. The numbers are c10's `DeviceType` numbers, so values
/// interoperate with PyTorch.
#[repr(i8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceType {
    /// Host memory.
    Cpu = 0,
    /// NVIDIA GPUs.
    Cuda = 1,
    /// AMD GPUs.
    Hip = 6,
    /// Intel GPUs.
    Xpu = 12,
    /// Apple GPUs.
    Mps = 13,
    /// Metadata only: tensors with sizes but no data.
    Meta = 14,
    /// The first device type reserved for out-of-tree backends.
    PrivateUse1 = 20,
}

impl DeviceType {
    /// Every supported device type.
    pub const ALL: [DeviceType; 7] = [
        DeviceType::Cpu,
        DeviceType::Cuda,
        DeviceType::Hip,
        DeviceType::Xpu,
        DeviceType::Mps,
        DeviceType::Meta,
        DeviceType::PrivateUse1,
    ];

    /// One more than the largest device-type number (slots in a registry).
    pub const SLOTS: usize = 21;

    /// The device type with c10's number `raw`.
    pub fn from_raw(raw: i8) -> Result<DeviceType> {
        Ok(match raw {
            0 => DeviceType::Cpu,
            1 => DeviceType::Cuda,
            6 => DeviceType::Hip,
            12 => DeviceType::Xpu,
            13 => DeviceType::Mps,
            14 => DeviceType::Meta,
            20 => DeviceType::PrivateUse1,
            _ => crate::bail!(
                InvalidArgument,
                "unknown device type {raw}: expected one of 0 (CPU), 1 (CUDA), 6 (HIP), 12 (XPU), \
                 13 (MPS), 14 (Meta), 20 (PrivateUse1)"
            ),
        })
    }

    /// c10's number of this device type.
    pub fn raw(self) -> i8 {
        self as i8
    }

    /// The lower-case name c10 prints ("cpu", "cuda", ...).
    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Cuda => "cuda",
            DeviceType::Hip => "hip",
            DeviceType::Xpu => "xpu",
            DeviceType::Mps => "mps",
            DeviceType::Meta => "meta",
            DeviceType::PrivateUse1 => "privateuseone",
        }
    }
}

/// A device: a type and an index (-1 means "the current one").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    /// The kind of device.
    pub device_type: DeviceType,
    /// The device index, -1 for the current device of that type.
    pub index: i8,
}

impl Device {
    /// The host.
    pub const CPU: Device = Device {
        device_type: DeviceType::Cpu,
        index: -1,
    };

    /// A device from a type and index; the index must be >= -1.
    pub fn new(device_type: DeviceType, index: i8) -> Result<Device> {
        crate::ensure!(
            index >= -1,
            InvalidArgument,
            "device index {index} is invalid: expected -1 (current) or a non-negative index"
        );
        crate::ensure!(
            !(device_type == DeviceType::Cpu && index > 0),
            InvalidArgument,
            "device index {index} is invalid for cpu: expected -1 or 0"
        );
        Ok(Device { device_type, index })
    }

    /// Whether this is the host.
    pub fn is_cpu(self) -> bool {
        self.device_type == DeviceType::Cpu
    }

    /// Whether two devices name the same place: CPU index -1 and 0 are the
    /// same host.
    pub fn same_as(self, other: Device) -> bool {
        if self.device_type != other.device_type {
            return false;
        }
        self.device_type == DeviceType::Cpu || self.index == other.index
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.index < 0 {
            write!(f, "{}", self.device_type.name())
        } else {
            write!(f, "{}:{}", self.device_type.name(), self.index)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_numbers_round_trip() {
        for t in DeviceType::ALL {
            assert_eq!(DeviceType::from_raw(t.raw()).unwrap(), t);
        }
        assert_eq!(DeviceType::Cuda.raw(), 1);
        assert_eq!(DeviceType::PrivateUse1.raw(), 20);
        let e = DeviceType::from_raw(2).unwrap_err();
        assert!(e.message().contains("unknown device type 2"), "{e}");
    }

    #[test]
    fn display_and_sameness() {
        assert_eq!(Device::CPU.to_string(), "cpu");
        let cuda1 = Device::new(DeviceType::Cuda, 1).unwrap();
        assert_eq!(cuda1.to_string(), "cuda:1");
        assert!(Device::CPU.same_as(Device::new(DeviceType::Cpu, 0).unwrap()));
        assert!(!cuda1.same_as(Device::new(DeviceType::Cuda, 0).unwrap()));
        assert!(Device::new(DeviceType::Cuda, -2).is_err());
    }
}
