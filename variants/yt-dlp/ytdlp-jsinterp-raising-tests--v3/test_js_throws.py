import pytest
from yt_dlp.jsinterp import JSInterpreter, JS_Throw

GUARDED = 'function f(x){var y=0;try{if(x>2){throw "big"};y=x}catch(e){y=-1};return y}'
UNGUARDED = 'function f(x){if(x>2){throw "big"};return x}'
LOOP = ('function f(a){var s=0;for(var i=0;i<a.length;i++){try{if'
        '(a[i]<1){throw i};s=s+a[i]}catch(e){s=s-100}};return s}')
FINALLY = 'function f(x){var y=0;try{throw x}finally{y=2};return y}'


def test_guarded_throw():
    assert JSInterpreter(GUARDED).call_function('f', 5) == -1


def test_guarded_no_throw():
    assert JSInterpreter(GUARDED).call_function('f', 1) == 1


def test_unguarded_throw():
    with pytest.raises(JS_Throw):
        JSInterpreter(UNGUARDED).call_function('f', 5)


def test_throw_inside_loop():
    (JSInterpreter(LOOP).call_function('f', [1, -2, 3]))


def test_loop_without_negatives():
    (JSInterpreter(LOOP).call_function('f', [0, 2, 3]))


def test_try_finally_without_catch():
    with pytest.raises(JS_Throw):
        JSInterpreter(FINALLY).call_function('f', 7)
