"""hvdlog.runtime.rank: where rank information comes from before and after hvd.init()."""

from __future__ import annotations

from hvdlog.runtime.rank import from_environment, from_horovod


class TestFromEnvironment:
    def test_gloo_variables(self) -> None:
        """horovodrun --gloo's HOROVOD_* variables give all four numbers."""
        env = {"HOROVOD_RANK": "3", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_SIZE": "8", "HOROVOD_LOCAL_SIZE": "2"}
        info = from_environment(env)
        assert (info.rank, info.local_rank, info.size, info.local_size) == (3, 1, 8, 2)

    def test_open_mpi_variables(self) -> None:
        """mpirun's OMPI_COMM_WORLD_* variables are read when HOROVOD_* are absent."""
        env = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_SIZE": "6", "OMPI_COMM_WORLD_LOCAL_SIZE": "3"}
        assert from_environment(env).as_fields() == {"rank": 5, "local_rank": 0, "size": 6, "local_size": 3}

    def test_pmi_and_precedence(self) -> None:
        """PMI_RANK counts, and HOROVOD_RANK wins over it."""
        assert from_environment({"PMI_RANK": "2", "PMI_SIZE": "4"}).rank == 2
        assert from_environment({"PMI_RANK": "2", "HOROVOD_RANK": "7"}).rank == 7

    def test_nothing_known(self) -> None:
        """Without launcher variables every number is None, not a guess."""
        assert from_environment({"HOROVOD_RANK": "x"}).as_fields() == {"rank": None, "local_rank": None, "size": None, "local_size": None}


class TestFromHorovod:
    def test_not_initialised_is_none(self) -> None:
        """Asking before hvd.init() answers None instead of raising."""
        import horovod.torch  # noqa: F401 - imported so the check looks at a real, uninitialised Horovod

        assert from_horovod() is None
