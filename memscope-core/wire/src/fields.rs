//! Field types of the records (the enums some records carry), apart from the codec so the
//! record type and every family's codec can use them without importing each other.

/// How an ATB operator or kernel uses a tensor (the Event Type of its ACCESS row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AccessKind {
    /// Read (kernel inputs).
    Read = 1,
    /// Written (operator and kernel outputs).
    Write = 2,
    /// Unknown direction (operator inputs, msMemScope's rule).
    Unknown = 3,
}

impl AccessKind {
    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<AccessKind> {
        [AccessKind::Read, AccessKind::Write, AccessKind::Unknown]
            .into_iter()
            .find(|k| *k as u8 == v)
    }
}

/// What a [`crate::Record::PyCodeDef`] names (how its `FuncInfo` is spelled, spec §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PyCodeKind {
    /// A Python function: `file(line): name`.
    Function = 1,
    /// A C function (`PyTrace_C_CALL`): `name` is its description.
    CFunction = 2,
    /// `torch.nn.Module.__call__` of class `name`: `nn.Module: name`.
    Module = 3,
    /// A `RecordFunction(name)` block: `name` as given.
    User = 4,
}

impl PyCodeKind {
    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<PyCodeKind> {
        [
            PyCodeKind::Function,
            PyCodeKind::CFunction,
            PyCodeKind::Module,
            PyCodeKind::User,
        ]
        .into_iter()
        .find(|k| *k as u8 == v)
    }
}

/// What a [`crate::Record::PyTrace`] marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PyTraceEvent {
    /// `tracer.start()`: the profile hook was installed (every thread of the interpreter).
    Start = 1,
    /// `tracer.stop()`: the hook was removed.
    Stop = 2,
    /// A frame on the calling thread's stack at start (outermost first), `code` names it.
    FrameAtStart = 3,
    /// A frame on the calling thread's stack at stop (outermost first).
    FrameAtStop = 4,
}

impl PyTraceEvent {
    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<PyTraceEvent> {
        [
            PyTraceEvent::Start,
            PyTraceEvent::Stop,
            PyTraceEvent::FrameAtStart,
            PyTraceEvent::FrameAtStop,
        ]
        .into_iter()
        .find(|k| *k as u8 == v)
    }
}
