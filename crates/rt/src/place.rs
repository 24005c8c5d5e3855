//! Where a benchmark program runs: a core of Reef, or a CPU of Linux.

/// Where the calling thread runs, as a benchmark reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// On Reef, on `core` of `instances` kernel instances.
    Reef { core: usize, instances: usize },
    /// On Linux, on `cpu` when `getcpu` answered.
    Linux { cpu: Option<usize> },
}

impl Place {
    /// Asks the kernel: Reef's `reef_core` and `reef_cores`, else Linux's `getcpu`.
    pub fn find() -> Self {
        match (crate::current_core(), crate::instance_count()) {
            (Some(core), Some(instances)) => Place::Reef { core, instances },
            _ => Place::Linux { cpu: crate::current_cpu() },
        }
    }

    /// The core (Reef) or CPU (Linux), if known.
    pub fn core(self) -> Option<usize> {
        match self {
            Place::Reef { core, .. } => Some(core),
            Place::Linux { cpu } => cpu,
        }
    }

    /// `os=reef core=N` or `os=linux core=N` (`core=unknown` when `getcpu` failed): the fields
    /// every benchmark's configuration line starts with.
    pub fn fields(self) -> String {
        let os = match self {
            Place::Reef { .. } => "reef",
            Place::Linux { .. } => "linux",
        };
        match self.core() {
            Some(core) => format!("os={os} core={core}"),
            None => format!("os={os} core=unknown"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_name_the_os_and_the_core() {
        assert_eq!(Place::Reef { core: 2, instances: 4 }.fields(), "os=reef core=2");
        assert_eq!(Place::Reef { core: 1, instances: 2 }.fields(), "os=reef core=1");
        assert_eq!(Place::Linux { cpu: Some(0) }.fields(), "os=linux core=0");
        assert_eq!(Place::Linux { cpu: Some(1) }.fields(), "os=linux core=1");
        assert_eq!(Place::Linux { cpu: None }.fields(), "os=linux core=unknown");
        assert!(matches!(Place::find(), Place::Linux { cpu: Some(_) }), "on the host: Linux, getcpu answers");
    }
}
