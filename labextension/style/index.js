import './base.css';
import './diff.css';
import './ansi.css';
