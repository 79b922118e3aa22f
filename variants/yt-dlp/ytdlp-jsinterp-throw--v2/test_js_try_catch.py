from yt_dlp.jsinterp import JSInterpreter

CODE = 'function f(x){var y=0;try{if(x>2){throw "bigbig"};y=x}catch(e){y=-1};return y}'


def test_throw_is_caught():
    (JSInterpreter(CODE).call_function('f', 5))
