// Spelling of campaign axes on the command line and in report.json: comma lists of recipes, subjects,
// sizes, masks, distributions and tiles. Every parser throws UsageError with a message that names the
// flag and the offending value, which the commands turn into exit code 2.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "tools/report/report_data.h"

namespace fc::report {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::vector<Recipe> parse_recipes(const std::string& flag, const std::vector<std::string>& names);
std::vector<Distribution> parse_distributions(const std::string& flag, const std::vector<std::string>& names);
std::vector<std::string> parse_masks(const std::string& flag, const std::vector<std::string>& names);
// "64x32" (Br x Bc) or "64" (square).
TileSize parse_tile(const std::string& flag, const std::string& text);
std::vector<TileSize> parse_tiles(const std::string& flag, const std::vector<std::string>& texts);
std::string tile_name(const TileSize& t);
// Positive sizes, each at most `max` (a guard against typos that would run for days).
std::vector<int64_t> parse_sizes(const std::string& flag, const std::vector<std::string>& texts, int64_t max);

std::string join(const std::vector<std::string>& items, const std::string& sep = ",");
std::vector<std::string> recipe_names(const std::vector<Recipe>& rs);
std::vector<std::string> distribution_names(const std::vector<Distribution>& ds);
std::string all_recipe_names();
std::string all_distribution_names();

// The embedded default campaign of `flashcheck report` (see docs/report-format.md for why these axes).
CampaignSpec default_campaign(const std::vector<std::string>& subjects);

// Throws UsageError when a shape of the campaign is impossible (n < 1, d < 1, heads that do not divide,
// a tile with zero rows...), naming the flag.
void validate_campaign(const CampaignSpec& spec);

}  // namespace fc::report
