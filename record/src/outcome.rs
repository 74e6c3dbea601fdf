//! How a cell ended: the `outcome` of every `result.json`, and the one place its names
//! are spelled. A record whose outcome is none of these is an error when read.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// Every outcome, in the order of [`Outcome::worst`]'s ranks.
    pub const ALL: [Outcome; 7] = [
        Outcome::Pass,
        Outcome::Share,
        Outcome::Void,
        Outcome::Refused,
        Outcome::Fail,
        Outcome::Interrupted,
        Outcome::Abandoned,
    ];

    /// The name a record and the console spell it with.
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

    /// A measured result of the system whose checker passed (PASS): what tables and
    /// statistics take as an observation.
    pub fn is_pass(self) -> bool {
        self == Outcome::Pass
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An outcome name no crossbench has written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown outcome {0:?}: expected one of PASS, FAIL, VOID, REFUSED, INTERRUPTED, SHARE, ABANDONED")]
pub struct UnknownOutcome(pub String);

impl FromStr for Outcome {
    type Err = UnknownOutcome;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| UnknownOutcome(s.to_string()))
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
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

    #[test]
    fn names_round_trip_and_an_unknown_name_is_an_error() {
        for o in Outcome::ALL {
            assert_eq!(o.name().parse::<Outcome>(), Ok(o));
            let json = serde_json::to_string(&o).unwrap();
            assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), o);
        }
        assert!("pass".parse::<Outcome>().is_err());
        let e = serde_json::from_str::<Outcome>("\"NOT-HELD\"").unwrap_err();
        assert!(e.to_string().contains("unknown outcome"), "{e}");
    }
}
