"""The tables of a release, by name: what the bundle copies, the card describes and the
workflow asks for (one list, below the modules that use it)."""

TABLES = ("models", "groups", "layers", "heads")
CSV_TABLES = ("models", "groups")  # the small ones
NULL_TABLE = "null_reference"
SWEEP_TABLES = ("models", "layers", "heads")  # of the sweeps' aggregate, as data/sweep_<table>
SWEEP_CSV_TABLES = ("models",)


def aggregate_files(tables=TABLES, csv_tables=CSV_TABLES) -> list[str]:
    """The files of an aggregate folder that a release copies (the population's by default;
    the sweeps' with SWEEP_TABLES, SWEEP_CSV_TABLES): the workflow's inputs of the release."""
    return [f"{t}.parquet" for t in tables] + [f"{t}.csv" for t in csv_tables]
