"""ipykernel's private members that remote/magic.display_unflushed reads or shadows."""

import inspect

from ipykernel.iostream import OutStream
from ipykernel.zmqshell import ZMQDisplayPublisher


def test_the_display_publisher_flushes_through_the_method_display_unflushed_shadows():
    assert "_flush_streams" in vars(ZMQDisplayPublisher)
    assert "self._flush_streams()" in inspect.getsource(ZMQDisplayPublisher.publish)


def test_an_output_stream_says_whether_it_holds_output_to_flush():
    assert "self._flush_pending = False" in inspect.getsource(OutStream.__init__)
