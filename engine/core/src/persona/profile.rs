//! Persona profiles, generated deterministically from the trait table.

pub use crate::config::panel::Given;
use crate::error::{Error, Result};
use crate::rng::{Purpose, Stream};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The built-in trait table.
pub const DEFAULT_TRAITS: &str = include_str!("../../../../fixtures/personas/traits.toml");

/// An age band with its weight.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgeBand {
    /// Youngest age, inclusive.
    pub min: u8,
    /// Oldest age, inclusive.
    pub max: u8,
    /// Relative weight.
    pub weight: f64,
}

/// A city with its weight.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct City {
    /// City name.
    pub name: Arc<str>,
    /// Relative weight.
    pub weight: f64,
}

/// An income band and the price sensitivity it centres on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncomeBand {
    /// Shown in the profile.
    pub label: Arc<str>,
    /// Relative weight.
    pub weight: f64,
    /// Centre of the band's price sensitivity, in [0, 1].
    pub price_sensitivity: f64,
}

/// The trait table personas are drawn from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Traits {
    /// Given names.
    pub first_names: Vec<String>,
    /// Family names.
    pub last_names: Vec<String>,
    /// Occupations.
    pub occupations: Vec<Arc<str>>,
    /// Interest vocabulary; scenario categories match against it.
    pub interests: Vec<Arc<str>>,
    /// Fewest interests per persona.
    pub interests_min: usize,
    /// Most interests per persona.
    pub interests_max: usize,
    /// Brands personas hold attitudes about.
    pub brands: Vec<Arc<str>>,
    /// Spread of brand attitudes.
    pub brand_attitude_sd: f64,
    /// Age bands.
    pub age_bands: Vec<AgeBand>,
    /// Cities.
    pub cities: Vec<City>,
    /// Income bands.
    pub income_bands: Vec<IncomeBand>,
    /// Biography templates.
    pub bio_templates: Vec<String>,
}

impl Traits {
    /// The built-in table.
    pub fn builtin() -> Traits {
        Traits::from_toml(DEFAULT_TRAITS, "fixtures/personas/traits.toml")
            .expect("the built-in trait table is valid; this is a bug")
    }

    /// Parses and validates a trait table.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Traits> {
        let t: Traits =
            toml::from_str(text).map_err(|e| Error::Parse { source_name: source_name.into(), source: Box::new(e) })?;
        let bad = |field: &str, cause: &str| Error::Fixture {
            source_name: source_name.into(),
            field: field.into(),
            cause: cause.into(),
        };
        for (name, empty) in [
            ("first_names", t.first_names.is_empty()),
            ("last_names", t.last_names.is_empty()),
            ("occupations", t.occupations.is_empty()),
            ("age_bands", t.age_bands.is_empty()),
            ("cities", t.cities.is_empty()),
            ("income_bands", t.income_bands.is_empty()),
            ("bio_templates", t.bio_templates.is_empty()),
        ] {
            if empty {
                return Err(bad(name, "must not be empty"));
            }
        }
        if t.interests.len() < t.interests_max.max(2) || t.interests_min > t.interests_max || t.interests_min < 2 {
            return Err(bad("interests_min", "need 2 <= interests_min <= interests_max <= number of interests"));
        }
        if t.age_bands.iter().any(|b| b.min > b.max) {
            return Err(bad("age_bands", "min must not exceed max"));
        }
        Ok(t)
    }
}

/// One persona.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Index in the panel, from 0.
    pub id: u32,
    /// Full name.
    pub name: String,
    /// Age in years.
    pub age: u8,
    /// Home city.
    pub city: Arc<str>,
    /// Occupation.
    pub occupation: Arc<str>,
    /// Income band label.
    pub income: Arc<str>,
    /// Interests, in draw order.
    pub interests: Vec<Arc<str>>,
    /// Price sensitivity in [0, 1], two decimals.
    pub price_sensitivity: f32,
    /// Attitude to each brand in [-1, 1], two decimals, in table order.
    pub brand_attitudes: Vec<(Arc<str>, f32)>,
    /// A one-sentence biography.
    pub bio: String,
    /// The respondent this persona is, for a panel given by data
    /// (`run --panel`): its row id and traits. Such a persona has only what
    /// its row gives: its prompt states those traits and its name, nothing
    /// drawn (its empty `city`, `occupation`, `income`, `bio` and brand
    /// attitudes, its age 0 when the row has none and its price
    /// sensitivity 0.5 are placeholders no prompt shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<Given>,
}

impl Profile {
    /// The persona's label, e.g. `p-00017`.
    pub fn label(&self) -> String {
        label(self.id)
    }
}

/// The label of persona `id`.
pub fn label(id: u32) -> String {
    format!("p-{id:05}")
}

fn round2(x: f64) -> f32 {
    ((x * 100.0).round() / 100.0) as f32
}

/// Fills a bio template: the same text as replacing each placeholder in
/// turn, in one pass over the template. When a value itself holds a `{`,
/// a later placeholder could match inside it, so the placeholders are then
/// replaced one at a time, exactly as written.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    if values.iter().any(|(_, v)| v.contains('{')) {
        return values.iter().fold(template.to_string(), |t, (k, v)| t.replace(k, v));
    }
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match values.iter().find(|(k, _)| rest.starts_with(k)) {
            Some((k, v)) => {
                out.push_str(v);
                rest = &rest[k.len()..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Draws persona `id` for `seed`. Independent of every other persona, so a
/// panel of any size is generated in linear time and any prefix of a panel
/// is the smaller panel.
pub fn generate(traits: &Traits, seed: u64, id: u32) -> Profile {
    let mut s = Stream::derive(seed, 0, u64::from(id), Purpose::Persona);
    let first = s.pick(&traits.first_names).clone();
    let last = s.pick(&traits.last_names).clone();
    let band = &traits.age_bands[s.weighted_by(&traits.age_bands, |b| b.weight)];
    let age = band.min + s.below(usize::from(band.max - band.min) + 1) as u8;
    let city = traits.cities[s.weighted_by(&traits.cities, |c| c.weight)].name.clone();
    let occupation = s.pick(&traits.occupations).clone();
    let income = &traits.income_bands[s.weighted_by(&traits.income_bands, |b| b.weight)];
    let n_interests = traits.interests_min + s.below(traits.interests_max - traits.interests_min + 1);
    let mut pool: Vec<usize> = (0..traits.interests.len()).collect();
    let mut interests = Vec::with_capacity(n_interests);
    for _ in 0..n_interests {
        let i = s.below(pool.len());
        interests.push(traits.interests[pool.swap_remove(i)].clone());
    }
    let price_sensitivity = round2((income.price_sensitivity + 0.12 * s.normal()).clamp(0.0, 1.0));
    let brand_attitudes = traits
        .brands
        .iter()
        .map(|b| (b.clone(), round2((traits.brand_attitude_sd * s.normal()).clamp(-1.0, 1.0))))
        .collect();
    let age_text = age.to_string();
    let bio = fill(
        s.pick(&traits.bio_templates).as_str(),
        &[
            ("{first}", &first),
            ("{age}", &age_text),
            ("{occupation}", &occupation),
            ("{city}", &city),
            ("{interest0}", &interests[0]),
            ("{interest1}", &interests[1]),
            ("{income}", &income.label),
        ],
    );
    Profile {
        id,
        name: format!("{first} {last}"),
        age,
        city,
        occupation,
        income: income.label.clone(),
        interests,
        price_sensitivity,
        brand_attitudes,
        bio,
        given: None,
    }
}

/// Persona `id` of a run of `cfg`: row `id` of its `[panel]` when it has
/// one, else drawn from `traits` (see [`generate`]). `None` when the panel
/// has no row `id`.
pub fn draw(cfg: &crate::config::Config, traits: &Traits, seed: u64, id: u32) -> Option<Profile> {
    draw_from(cfg.raw.panel.as_ref(), traits, seed, id)
}

/// [`draw`] from a run's `[panel]` section (or none).
pub fn draw_from(
    panel: Option<&crate::config::panel::PanelSection>,
    traits: &Traits,
    seed: u64,
    id: u32,
) -> Option<Profile> {
    match panel {
        Some(panel) => panel.rows.get(id as usize).map(|row| given(traits, seed, id, row)),
        None => Some(generate(traits, seed, id)),
    }
}

/// Persona `id` given by `row`: its traits as the row states them, and a
/// name drawn from the trait table, seeded by the run seed and the row id
/// (so a respondent keeps their name in any subsample). A few traits fill
/// the profile's own fields when the row names them: `age` (a whole
/// number), `city`, `occupation`, `income` or `household income`, and
/// `interests` (comma-separated, which scenario rules by interest match).
pub fn given(traits: &Traits, seed: u64, id: u32, row: &Given) -> Profile {
    let key = crate::digest::DigestWriter::new("panel persona name v1").u64(seed).str(&row.row).finish();
    let mut s = Stream::from_key(key.0);
    let first = s.pick(&traits.first_names).clone();
    let last = s.pick(&traits.last_names).clone();
    let text = |name: &str| -> Arc<str> { row.get(name).unwrap_or("").into() };
    Profile {
        id,
        name: format!("{first} {last}"),
        age: row.get("age").and_then(|a| a.trim().parse().ok()).unwrap_or(0),
        city: text("city"),
        occupation: text("occupation"),
        income: row.get("income").or_else(|| row.get("household income")).unwrap_or("").into(),
        interests: row
            .get("interests")
            .map(|v| v.split(',').map(str::trim).filter(|i| !i.is_empty()).map(Arc::from).collect())
            .unwrap_or_default(),
        price_sensitivity: 0.5,
        brand_attitudes: Vec::new(),
        bio: String::new(),
        given: Some(row.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_persona_and_seeds_differ() {
        let t = Traits::builtin();
        assert_eq!(generate(&t, 1, 5), generate(&t, 1, 5));
        assert_ne!(generate(&t, 1, 5), generate(&t, 2, 5));
        assert_ne!(generate(&t, 1, 5), generate(&t, 1, 6));
    }

    #[test]
    fn a_template_fills_as_replacing_each_placeholder_in_turn() {
        let chained = |t: &str, v: &[(&str, &str)]| v.iter().fold(t.to_string(), |t, (k, v)| t.replace(k, v));
        let values = [("{first}", "Ana"), ("{age}", "41"), ("{city}", "Lyon")];
        for t in ["{first}, {age}, of {city}.", "{{first}} {unknown} {age", "{city}{city}{", "", "no placeholder"] {
            assert_eq!(fill(t, &values), chained(t, &values), "{t:?}");
        }
        // A value that holds a placeholder is filled again by a later one.
        let tricky = [("{first}", "{city}"), ("{city}", "Lyon")];
        assert_eq!(fill("{first} of {city}", &tricky), "Lyon of Lyon");
    }

    #[test]
    fn traits_are_in_range_across_a_large_panel() {
        let t = Traits::builtin();
        let mut sensitivities = 0.0;
        for id in 0..100_000 {
            let p = generate(&t, 42, id);
            assert!((18..=85).contains(&p.age));
            assert!((0.0..=1.0).contains(&p.price_sensitivity));
            assert!(p.interests.len() >= 2 && p.interests[0] != p.interests[1]);
            assert!(!p.bio.contains('{'), "{}", p.bio);
            sensitivities += f64::from(p.price_sensitivity);
        }
        let mean = sensitivities / 100_000.0;
        assert!((0.4..0.65).contains(&mean), "mean price sensitivity {mean}");
    }

    #[test]
    fn a_given_persona_has_its_row_and_nothing_drawn() {
        let t = Traits::builtin();
        let row = Given {
            row: "r7".into(),
            traits: vec![("age".into(), "36".into()), ("interests".into(), "hiking, coffee".into())],
        };
        let p = given(&t, 42, 3, &row);
        assert_eq!((p.id, p.age, p.interests.len()), (3, 36, 2));
        assert!(p.city.is_empty() && p.occupation.is_empty() && p.bio.is_empty() && p.brand_attitudes.is_empty());
        assert_eq!(given(&t, 42, 9, &row).name, p.name, "the name follows the row, not the position");
        assert_eq!(p.given.as_ref().map(Given::describe).as_deref(), Some("- Age: 36\n- Interests: hiking, coffee\n"));
        let header = crate::persona::prompt::persona_header(&p);
        assert_eq!(header, format!("You are {}.\nAbout you:\n- Age: 36\n- Interests: hiking, coffee\n", p.name));
    }

    #[test]
    fn bad_trait_table_names_the_field() {
        let text = DEFAULT_TRAITS.replace("interests_min = 2", "interests_min = 9");
        let err = Traits::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(err.contains("t.toml") && err.contains("interests_min"), "{err}");
    }
}
