//! How a cell ended, and the exit code each ending maps to (docs: README.md).

/// How a cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Correct, and the loader held its schedule.
    Pass,
    /// A correctness failure (loss, reorder, duplicate) or a broken accounting identity.
    Fail,
    /// The loader, not the system, was the limit: not a result of the system.
    Void,
    /// The system refused the cell's topology at setup; recorded, no figures.
    Refused,
    /// Ctrl-C or SIGTERM stopped it: it drained for a short bounded time, was verified
    /// over what was delivered, and its record is complete; its figures cover the
    /// window as it ran.
    Interrupted,
    /// One loader's share of a cell of several loaders in the `shared` topology: it
    /// ran its share to the end, and the verdict is the merge's (`crossbench merge`),
    /// since its logs hold whichever keys the system handed it.
    Share,
    /// A cell of several loaders that a loader gave up (it failed, fell silent, or
    /// never arrived): every loader stopped, and each record says which loader and
    /// why.
    Abandoned,
}

impl Outcome {
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Void => "VOID",
            Outcome::Refused => "REFUSED",
            Outcome::Interrupted => "INTERRUPTED",
            Outcome::Share => "SHARE",
            Outcome::Abandoned => "ABANDONED",
        }
    }

    /// The worse of two outcomes (a ladder's exit): FAIL over REFUSED over VOID over
    /// PASS.
    pub fn worst(self, other: Outcome) -> Outcome {
        let rank = |o: Outcome| match o {
            Outcome::Pass => 0,
            Outcome::Share => 0,
            Outcome::Void => 1,
            Outcome::Refused => 2,
            Outcome::Fail => 3,
            Outcome::Interrupted => 4,
            Outcome::Abandoned => 5,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_ranks_fail_first() {
        use Outcome::*;
        assert_eq!(Pass.worst(Void), Void);
        assert_eq!(Void.worst(Refused), Refused);
        assert_eq!(Fail.worst(Refused), Fail);
        assert_eq!(Pass.worst(Pass), Pass);
    }
}
